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

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.BufferedWriter;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

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
            System.exit(0);
        }
        if (Boolean.getBoolean(PARENT_PIPE)) {
            watchParent();
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

    /** With -Dcapmetrics.spice.parent_pipe=true, stdin is a pipe from the parent that it never writes to. */
    static final String PARENT_PIPE = "capmetrics.spice.parent_pipe";

    /** Exit at once when stdin ends: the parent closed it, or died (even by SIGKILL), so no JVM outlives it. */
    static void watchParent() {
        Thread watch = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the parent writes nothing; wait for the end
                }
            } catch (IOException closed) {
                // the same: the parent is gone
            }
            Runtime.getRuntime().halt(3);
        }, "capmetrics-parent-watch");
        watch.setDaemon(true);
        watch.start();
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
                Map<String, ArrayList<ArrayList<String>>> tuples;
                synchronized (this) { // one chunk at a time on the parser (the server's clients share it)
                    tuples = (Map<String, ArrayList<ArrayList<String>>>) loadTuples.invoke(parser, new ArrayList<String>(part));
                }
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

    /** Seconds a client has to authenticate (the HELLO line and its proof) before it is dropped. */
    static final int AUTH_SECONDS = 10;
    /** Longest line read from a client before (and outside) its request body, in bytes. */
    static final int HEADER_BYTES = 256;
    /** Largest request body (a JSON array of captions), in bytes. */
    static final long MAX_REQUEST = 64L << 20;
    /** Connections served at once; more are closed at once. */
    static final int MAX_CLIENTS = 32;
    /** Seconds an authenticated client may stay silent while sending its request. */
    static final int READ_SECONDS = 60;

    /**
     * Parse for clients on 127.0.0.1 until IDLE_SECONDS pass without one. INFO.json gets
     * {"port", "token", "pid", "version"} (created owner-only, written whole, then renamed into
     * place) and is deleted on exit. Clients are served concurrently (one thread each, at most
     * MAX_CLIENTS; the parser itself parses one chunk at a time). The protocol, one line each:
     *   client: HELLO <client nonce>                    (hex; at most HEADER_BYTES)
     *   server: <server nonce> <HMAC(token, "server:" + client nonce + ":" + server nonce)>
     *   client: <HMAC(token, "client:" + server nonce + ":" + client nonce)>
     *   client: PING | STOP | PARSE <bytes>, then that many bytes: a JSON array of captions
     *   server: {"version": ...} | {"stopped": true} | the tuple lines, then {"done": count}
     * HMAC is HMAC-SHA256 in lower-case hex, keyed by the token's characters: neither side sends
     * the token, and each proves that it knows it before the other sends anything else. A client
     * that does not finish the first three lines within AUTH_SECONDS, or sends a longer line, is
     * dropped without slowing the others.
     */
    static void serve(Path info, int threads, int idleSeconds, String version) throws Exception {
        final Tuples tuples = new Tuples(threads, null);
        final String token = hex(16);
        String pid = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];
        final AtomicBoolean running = new AtomicBoolean(true);
        final AtomicInteger active = new AtomicInteger();
        final AtomicLong lastSeen = new AtomicLong(System.currentTimeMillis());
        final Semaphore slots = new Semaphore(MAX_CLIENTS);
        ExecutorService pool = Executors.newCachedThreadPool(runnable -> {
            Thread thread = new Thread(runnable, "capmetrics-client");
            thread.setDaemon(true);
            return thread;
        });
        try (ServerSocket server = new ServerSocket(0, 64, InetAddress.getLoopbackAddress())) {
            server.setSoTimeout(1000);
            Map<String, Object> fields = new LinkedHashMap<String, Object>();
            fields.put("port", Integer.valueOf(server.getLocalPort()));
            fields.put("token", token);
            fields.put("pid", Long.valueOf(pid));
            fields.put("version", version);
            writePrivate(info, info.resolveSibling(info.getFileName() + "." + pid + ".tmp"),
                    JSONValue.toJSONString(fields).getBytes(StandardCharsets.UTF_8));
            try {
                while (running.get()) {
                    final Socket client;
                    try {
                        client = server.accept();
                    } catch (SocketTimeoutException tick) {
                        if (active.get() == 0 && System.currentTimeMillis() - lastSeen.get() > idleSeconds * 1000L) {
                            break;
                        }
                        continue;
                    }
                    if (!slots.tryAcquire()) {
                        client.close();
                        continue;
                    }
                    active.incrementAndGet();
                    pool.execute(() -> {
                        try (Socket open = client) {
                            if (!answer(open, tuples, token, version)) {
                                running.set(false);
                            }
                        } catch (Throwable error) {
                            System.err.println("capmetrics spice server: a request failed: " + error);
                        } finally {
                            lastSeen.set(System.currentTimeMillis());
                            active.decrementAndGet();
                            slots.release();
                        }
                    });
                }
            } finally {
                try {
                    if (new String(Files.readAllBytes(info), StandardCharsets.UTF_8).contains(token)) {
                        Files.delete(info);
                    }
                } catch (IOException gone) {
                    // another server's file, or none
                }
                pool.shutdownNow();
            }
        }
    }

    /** Write BYTES to TARGET through TMP, a file created owner-only (0600) from the start. */
    static void writePrivate(Path target, Path tmp, byte[] bytes) throws IOException {
        Files.deleteIfExists(tmp);
        try {
            Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (UnsupportedOperationException notPosix) {
            Files.createFile(tmp); // the user's cache folder is the protection left
        }
        Files.write(tmp, bytes);
        Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    static String hex(int bytes) {
        byte[] secret = new byte[bytes];
        RANDOM.nextBytes(secret);
        StringBuilder text = new StringBuilder();
        for (byte b : secret) {
            text.append(String.format("%02x", b & 0xff));
        }
        return text.toString();
    }

    static final SecureRandom RANDOM = new SecureRandom();

    static String mac(String token, String message) throws Exception {
        Mac hmac = Mac.getInstance("HmacSHA256");
        hmac.init(new SecretKeySpec(token.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        StringBuilder text = new StringBuilder();
        for (byte b : hmac.doFinal(message.getBytes(StandardCharsets.UTF_8))) {
            text.append(String.format("%02x", b & 0xff));
        }
        return text.toString();
    }

    /** One line of at most HEADER_BYTES bytes (without its newline), or null (longer, or the end). */
    static String readLine(InputStream in, Socket client, long deadline) throws IOException {
        byte[] line = new byte[HEADER_BYTES];
        for (int n = 0; n < HEADER_BYTES; n++) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                throw new SocketTimeoutException("too slow");
            }
            client.setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
            int b = in.read();
            if (b < 0) {
                return null;
            }
            if (b == '\n') {
                return new String(line, 0, n, StandardCharsets.UTF_8);
            }
            line[n] = (byte) b;
        }
        return null;
    }

    /** One client's connection; false when it asked the server to stop. */
    private static boolean answer(Socket client, Tuples tuples, String token, String version) throws Exception {
        InputStream in = new BufferedInputStream(client.getInputStream());
        OutputStream raw = client.getOutputStream();
        long deadline = System.currentTimeMillis() + AUTH_SECONDS * 1000L;
        String hello = readLine(in, client, deadline);
        if (hello == null || !hello.matches("HELLO [0-9a-f]{32,64}")) {
            return true;
        }
        String clientNonce = hello.substring(6);
        String serverNonce = hex(16);
        raw.write((serverNonce + " " + mac(token, "server:" + clientNonce + ":" + serverNonce) + "\n")
                .getBytes(StandardCharsets.UTF_8));
        raw.flush();
        String proof = readLine(in, client, deadline);
        byte[] expected = mac(token, "client:" + serverNonce + ":" + clientNonce).getBytes(StandardCharsets.UTF_8);
        if (proof == null || !MessageDigest.isEqual(expected, proof.getBytes(StandardCharsets.UTF_8))) {
            return true;
        }
        String request = readLine(in, client, System.currentTimeMillis() + READ_SECONDS * 1000L);
        if (request == null) {
            return true;
        }
        client.setSoTimeout(READ_SECONDS * 1000);
        Writer out = new BufferedWriter(new OutputStreamWriter(raw, StandardCharsets.UTF_8));
        if (request.equals("STOP") || request.equals("PING")) {
            out.write(request.equals("STOP") ? "{\"stopped\":true}\n" : "{\"version\":" + JSONValue.toJSONString(version) + "}\n");
            out.flush();
            return !request.equals("STOP");
        }
        long size = request.matches("PARSE [0-9]{1,12}") ? Long.parseLong(request.substring(6)) : -1;
        if (size < 0 || size > MAX_REQUEST) {
            out.write("{\"error\":\"a request is PARSE <bytes> with at most " + MAX_REQUEST + " bytes\"}\n");
            out.flush();
            return true;
        }
        byte[] body = new byte[(int) size];
        new DataInputStream(in).readFully(body);
        List<String> captions = captions((JSONArray) new JSONParser().parse(new String(body, StandardCharsets.UTF_8)));
        client.setSoTimeout(0);
        tuples.write(captions, 50, out);
        out.write("{\"done\":" + captions.size() + "}\n");
        out.flush();
        return true;
    }
}
