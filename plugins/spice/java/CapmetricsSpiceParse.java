// capmetrics: turn captions into SPICE's per-caption tuples with the jar's own parser.
//
// Usage: java -cp spice-1.0.jar:<CoreNLP jars>:<spice lib jars>:<this folder> CapmetricsSpiceParse
//            IN.json OUT.jsonl THREADS CHUNK [LMDB_DIR]
//        ... CapmetricsSpiceParse --serve INFO.json THREADS IDLE_SECONDS VERSION   (see serve())
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
//   NER's three CRF models is most of a cold start (and a fifth of the per-caption time);
// - the SpiceParser is made without its constructor, which only loads Meteor's synonym tables
//   (used for scoring, which capmetrics does in Python; unused by the parse);
// - the classes whose static set-up is slow (the dependency converter, the scene-graph enhancer
//   with its pronoun dictionaries, SPICE's patterns) are initialised on a second thread while the
//   main thread loads the parser model.
// With -Dcapmetrics.spice.jar_pipeline=true the jar's own start is used instead (its constructor,
// its annotators): experiments/spice_parser_equivalence.py compares the two on every caption.
//
// Built (the .class files next to this file) from the repository root with
//   javac --release 8 -cp "<pycocoevalcap>/spice/spice-1.0.jar:<pycocoevalcap>/spice/lib/*:<CoreNLP 3.6.0 jar>" \
//         -d plugins/spice/java plugins/spice/java/CapmetricsSpiceParse.java

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
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
        if (args.length == 5 && args[0].equals("--serve")) {
            serve(Paths.get(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]), args[4]);
            return;
        }
        if (args.length < 4) {
            System.err.println("usage: CapmetricsSpiceParse IN.json OUT.jsonl THREADS CHUNK [LMDB_DIR]\n"
                    + "       CapmetricsSpiceParse --serve INFO.json THREADS IDLE_SECONDS VERSION");
            System.exit(2);
        }
        List<String> captions = captions((JSONArray) new JSONParser().parse(new FileReader(args[0])));
        Tuples tuples = new Tuples(Integer.parseInt(args[2]), args.length > 4 ? args[4] : null);
        try (BufferedWriter out = new BufferedWriter(new FileWriter(args[1]))) {
            tuples.write(captions, Math.max(1, Integer.parseInt(args[3])), out);
        }
    }

    private static List<String> captions(JSONArray input) {
        List<String> captions = new ArrayList<String>();
        for (Object caption : input) {
            captions.add((String) caption);
        }
        return captions;
    }

    /** The parser, started once, and the tuples of captions written as JSON lines. */
    static final class Tuples {
        private final SpiceParser parser;
        private final Method loadTuples;

        Tuples(int threads, String cache) throws Exception {
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
            parser = parser(threads, cache);
            warmUp.join();
            if (warmUpError[0] != null) {
                throw new IllegalStateException("initialising the parser's classes failed", warmUpError[0]);
            }
            // SpiceParser.loadTuples is protected: the parse (and cache) step without any scoring.
            loadTuples = SpiceParser.class.getDeclaredMethod("loadTuples", List.class);
            loadTuples.setAccessible(true);
        }

        /** One line {"i": index, "t": tuples} per caption, flushed after every chunk. */
        void write(List<String> captions, int chunk, Writer out) throws Exception {
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

    /**
     * Parse for clients on 127.0.0.1 until IDLE_SECONDS pass without one. INFO.json gets
     * {"port", "token", "pid", "version"} (written whole, then renamed into place; readable by
     * the owner only where the file system allows) and is deleted on exit. A client sends the
     * token on one line, then a JSON array of captions on one line (or STOP, or PING), and reads
     * the tuple lines, then {"done": count}. Clients are served one after the other.
     */
    static void serve(Path info, int threads, int idleSeconds, String version) throws Exception {
        Tuples tuples = new Tuples(threads, null);
        byte[] secret = new byte[16];
        new SecureRandom().nextBytes(secret);
        StringBuilder token = new StringBuilder();
        for (byte b : secret) {
            token.append(String.format("%02x", b & 0xff));
        }
        String pid = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];
        try (ServerSocket server = new ServerSocket(0, 16, InetAddress.getLoopbackAddress())) {
            server.setSoTimeout(Math.max(1, idleSeconds) * 1000);
            Map<String, Object> fields = new LinkedHashMap<String, Object>();
            fields.put("port", Integer.valueOf(server.getLocalPort()));
            fields.put("token", token.toString());
            fields.put("pid", Long.valueOf(pid));
            fields.put("version", version);
            Path tmp = info.resolveSibling(info.getFileName() + "." + pid + ".tmp");
            Files.write(tmp, JSONValue.toJSONString(fields).getBytes(StandardCharsets.UTF_8));
            try {
                Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-------"));
            } catch (UnsupportedOperationException notPosix) {
                // the user's cache folder is the protection left
            }
            Files.move(tmp, info, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            try {
                boolean running = true;
                while (running) {
                    Socket client;
                    try {
                        client = server.accept();
                    } catch (SocketTimeoutException idle) {
                        break;
                    }
                    try (Socket open = client) {
                        running = answer(open, tuples, token.toString(), version);
                    } catch (Exception error) {
                        System.err.println("capmetrics spice server: a request failed: " + error);
                    }
                }
            } finally {
                try {
                    if (new String(Files.readAllBytes(info), StandardCharsets.UTF_8).contains(token.toString())) {
                        Files.delete(info);
                    }
                } catch (IOException gone) {
                    // another server's file, or none
                }
            }
        }
    }

    /** One client's request; false when it asked the server to stop. */
    private static boolean answer(Socket client, Tuples tuples, String token, String version) throws Exception {
        client.setSoTimeout(60000);
        BufferedReader in = new BufferedReader(new InputStreamReader(client.getInputStream(), StandardCharsets.UTF_8));
        Writer out = new BufferedWriter(new OutputStreamWriter(client.getOutputStream(), StandardCharsets.UTF_8));
        if (!token.equals(in.readLine())) {
            return true;
        }
        String request = in.readLine();
        if (request == null) {
            return true;
        }
        if (request.equals("STOP") || request.equals("PING")) {
            out.write(request.equals("STOP") ? "{\"stopped\":true}\n" : "{\"version\":" + JSONValue.toJSONString(version) + "}\n");
            out.flush();
            return !request.equals("STOP");
        }
        client.setSoTimeout(0);
        List<String> captions = captions((JSONArray) new JSONParser().parse(request));
        tuples.write(captions, 50, out);
        out.write("{\"done\":" + captions.size() + "}\n");
        out.flush();
        return true;
    }
}
