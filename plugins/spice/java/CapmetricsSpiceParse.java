// capmetrics: turn captions into SPICE's per-caption tuples with the jar's own parser.
//
// Usage: java -cp spice-1.0.jar:<CoreNLP jars>:<spice lib jars>:<this folder> CapmetricsSpiceParse
//            IN.json OUT.jsonl THREADS CHUNK [LMDB_DIR]
// IN.json is a JSON array of captions. For every caption, in chunks of CHUNK captions, the jar's
// SpiceParser (CoreNLP 3.6.0 + SPICE's dependency patterns) yields the list of string tuples
// ([object], [object, attribute], [subject, object, relation]) that SPICE builds its scene graphs
// from; each is written as one JSON line {"i": index, "t": tuples}, flushed after every chunk, so
// a killed run keeps the finished chunks. With LMDB_DIR the jar's own parse cache is read and filled.
// Nothing is scored here: capmetrics builds the scene graphs and matches the tuples in Python.
//
// Three things differ from the jar's own start, none of which changes a tuple:
// - CoreNLP runs "tokenize,ssplit,parse,lemma", the jar's annotators less "ner": SpiceParser reads
//   only the dependency graph, POS tags, words and lemmas, all made before NER runs, and loading
//   NER's three CRF models is most of a cold start (and a third of the per-caption time);
// - the SpiceParser is made without its constructor, which only loads Meteor's synonym tables
//   (used for scoring, which capmetrics does in Python; unused by the parse);
// - the classes whose static set-up is slow (the dependency converter, the scene-graph enhancer
//   with its pronoun dictionaries, SPICE's patterns) are initialised on a second thread while the
//   main thread loads the parser model.
// With -Dcapmetrics.spice.jar_pipeline=true the jar's own start is used instead (its constructor,
// its annotators): experiments/spice_parser_equivalence.py compares the two on every caption.
//
// Built (the .class next to this file) from the repository root with
//   javac --release 8 -cp "<pycocoevalcap>/spice/spice-1.0.jar:<pycocoevalcap>/spice/lib/*:<CoreNLP 3.6.0 jar>" \
//         -d plugins/spice/java plugins/spice/java/CapmetricsSpiceParse.java

import java.io.BufferedWriter;
import java.io.FileReader;
import java.io.FileWriter;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.json.simple.JSONArray;
import org.json.simple.JSONValue;
import org.json.simple.parser.JSONParser;

import org.objenesis.ObjenesisStd;

import edu.anu.spice.Annotator;
import edu.anu.spice.LmdbTupleDB;
import edu.anu.spice.SpiceParser;
import edu.stanford.nlp.pipeline.StanfordCoreNLP;

public final class CapmetricsSpiceParse {

    /** The jar's annotators (edu.anu.spice.Annotator) less "ner", whose tags SpiceParser never reads. */
    static final String ANNOTATORS = "tokenize,ssplit,parse,lemma";

    /** Classes with slow static set-up, initialised on a second thread while the parser loads. */
    static final String[] SLOW_CLASSES = {
        "edu.stanford.nlp.trees.UniversalEnglishGrammaticalStructure",
        "edu.stanford.nlp.scenegraph.SemanticGraphEnhancer",
        "edu.stanford.nlp.process.Morphology",
        "edu.anu.spice.SpiceParser",
    };

    private CapmetricsSpiceParse() {
    }

    /** SpiceParser with an Annotator whose CoreNLP pipeline runs ANNOTATORS on THREADS threads. */
    static SpiceParser parser(int threads, String cache) throws Exception {
        if (Boolean.getBoolean("capmetrics.spice.jar_pipeline")) {
            return new SpiceParser(cache, threads, Boolean.TRUE); // the jar's own start, for comparisons
        }
        Properties props = new Properties();
        props.setProperty("annotators", ANNOTATORS);
        props.setProperty("depparse.extradependencies", "MAXIMAL");
        props.setProperty("threads", Integer.toString(threads));
        Annotator annotator = new Annotator(threads, 10000);
        set(Annotator.class, annotator, "pipeline", new StanfordCoreNLP(props));
        SpiceParser parser = new ObjenesisStd().newInstance(SpiceParser.class);
        set(SpiceParser.class, parser, "annotator", annotator);
        set(SpiceParser.class, parser, "mergeSimilarNodes", Boolean.TRUE);
        if (cache != null) {
            set(SpiceParser.class, parser, "db", new LmdbTupleDB(cache));
        }
        return parser;
    }

    private static void set(Class<?> owner, Object target, String name, Object value) throws Exception {
        Field field = owner.getDeclaredField(name);
        field.setAccessible(true);
        field.set(target, value);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: CapmetricsSpiceParse IN.json OUT.jsonl THREADS CHUNK [LMDB_DIR]");
            System.exit(2);
        }
        JSONArray input = (JSONArray) new JSONParser().parse(new FileReader(args[0]));
        List<String> captions = new ArrayList<String>();
        for (Object caption : input) {
            captions.add((String) caption);
        }
        int threads = Integer.parseInt(args[2]);
        int chunk = Math.max(1, Integer.parseInt(args[3]));
        String cache = args.length > 4 ? args[4] : null;
        final Throwable[] warmUpError = new Throwable[1];
        Thread warmUp = new Thread(() -> {
            try {
                for (String name : SLOW_CLASSES) {
                    Class.forName(name, true, CapmetricsSpiceParse.class.getClassLoader());
                }
            } catch (Throwable error) {
                warmUpError[0] = error;
            }
        }, "capmetrics-warm-up");
        warmUp.start();
        SpiceParser parser = parser(threads, cache);
        warmUp.join();
        if (warmUpError[0] != null) {
            throw new IllegalStateException("initialising the parser's classes failed", warmUpError[0]);
        }
        // SpiceParser.loadTuples is protected: the parse (and cache) step without any scoring.
        Method loadTuples = SpiceParser.class.getDeclaredMethod("loadTuples", List.class);
        loadTuples.setAccessible(true);
        try (BufferedWriter out = new BufferedWriter(new FileWriter(args[1]))) {
            for (int start = 0; start < captions.size(); start += chunk) {
                List<String> part = captions.subList(start, Math.min(captions.size(), start + chunk));
                @SuppressWarnings("unchecked")
                Map<String, ArrayList<ArrayList<String>>> tuples =
                        (Map<String, ArrayList<ArrayList<String>>>) loadTuples.invoke(parser, new ArrayList<String>(part));
                for (int i = 0; i < part.size(); i++) {
                    ArrayList<ArrayList<String>> found = tuples.get(part.get(i));
                    if (found == null) {
                        throw new IllegalStateException("no parse for caption " + (start + i));
                    }
                    Map<String, Object> line = new LinkedHashMap<String, Object>();
                    line.put("i", Integer.valueOf(start + i));
                    line.put("t", found);
                    out.write(JSONValue.toJSONString(line));
                    out.write('\n');
                }
                out.flush();
            }
        }
    }
}
