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
// Built (the .class next to this file) from the repository root with
//   javac --release 8 -cp "<pycocoevalcap>/spice/spice-1.0.jar:<pycocoevalcap>/spice/lib/*" -d plugins/spice/java \
//         plugins/spice/java/CapmetricsSpiceParse.java

import java.io.BufferedWriter;
import java.io.FileReader;
import java.io.FileWriter;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.json.simple.JSONArray;
import org.json.simple.JSONValue;
import org.json.simple.parser.JSONParser;

import edu.anu.spice.SpiceParser;

public final class CapmetricsSpiceParse {

    private CapmetricsSpiceParse() {
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
        SpiceParser parser = new SpiceParser(cache, threads, Boolean.TRUE);
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
