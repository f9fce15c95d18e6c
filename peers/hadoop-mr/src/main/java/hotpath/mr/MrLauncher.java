package hotpath.mr;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.util.ExitUtil;
import org.apache.log4j.Level;
import org.apache.log4j.LogManager;

/**
 * The MapReduce peer's entry point: {@code MrLauncher mr-rm|mr-client|mr-shuffle --conf-dir DIR
 * [--work-dir DIR] [--delete-on-exit DIR] [--set key=value]... [--log-level LEVEL|logger=LEVEL]...
 * [--local-dirs DIR[,DIR]...]}.
 *
 * <p>The same line protocol as the main peer's {@code hotpath.peer.Launcher} (so that
 * {@code peers/harness} drives both alike): start the services, write the site files into the
 * conf dir, print {@code READY {json}} on stdout, then answer each stdin line with one JSON line,
 * {@code {"ok":true,...}} or {@code {"ok":false,"error":"<class>: <first message line>",
 * "exception_class":...,"message":...}}. End of stdin stops everything. All logging (and
 * System.out) goes to stderr. The modes: {@code mr-rm} (a Java RM here) and {@code mr-client}
 * (jobs submitted to an RM elsewhere) are {@link MrRm}; {@code mr-shuffle} is {@link MrShuffle}
 * (Hadoop's ShuffleHandler hosted standalone).
 */
public final class MrLauncher {
  /** End-of-stdin marker in the line queue (compared by identity). */
  private static final String EOF = new String("EOF");

  private static volatile boolean ready;
  private static volatile Path deleteOnExit;

  private MrLauncher() {}

  public static void main(String[] argv) throws Exception {
    PrintStream out =
        new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    ExitUtil.disableSystemExit();
    ExitUtil.disableSystemHalt();

    BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    Thread reader = new Thread(() -> readStdin(lines), "mr-peer-stdin");
    reader.setDaemon(true);
    reader.start();

    long t0 = System.nanoTime();
    PeerMode mode;
    Path confDir;
    try {
      if (argv.length == 0
          || !(argv[0].equals("mr-rm") || argv[0].equals("mr-client")
              || argv[0].equals("mr-shuffle"))) {
        throw new IllegalArgumentException("the mode must be mr-rm, mr-client or mr-shuffle");
      }
      Map<String, String> single = new LinkedHashMap<>();
      List<String[]> sets = new ArrayList<>();
      for (int i = 1; i < argv.length; i += 2) {
        if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
          throw new IllegalArgumentException("expected --name value at " + argv[i]);
        }
        String k = argv[i].substring(2);
        String v = argv[i + 1];
        switch (k) {
          case "set" -> {
            int eq = v.indexOf('=');
            if (eq <= 0) {
              throw new IllegalArgumentException("--set wants key=value, got " + v);
            }
            sets.add(new String[] {v.substring(0, eq), v.substring(eq + 1)});
          }
          case "log-level" -> {
            int eq = v.indexOf('=');
            if (eq < 0) {
              LogManager.getRootLogger().setLevel(Level.toLevel(v));
            } else {
              LogManager.getLogger(v.substring(0, eq)).setLevel(Level.toLevel(v.substring(eq + 1)));
            }
          }
          default -> single.put(k, v);
        }
      }
      String conf = single.get("conf-dir");
      if (conf == null) {
        throw new IllegalArgumentException("--conf-dir is required");
      }
      confDir = Paths.get(conf).toAbsolutePath();
      Path workDir = Paths.get(single.getOrDefault("work-dir", confDir + ".work")).toAbsolutePath();
      String del = single.get("delete-on-exit");
      deleteOnExit = del == null ? null : Paths.get(del).toAbsolutePath();
      Files.createDirectories(confDir);
      Files.createDirectories(workDir);
      System.setProperty("test.build.data", workDir.toString());
      System.setProperty("hadoop.tmp.dir", workDir.resolve("tmp").toString());
      mode = argv[0].equals("mr-shuffle")
          ? new MrShuffle(sets, single, workDir)
          : new MrRm(sets, workDir, argv[0].equals("mr-client"));
    } catch (Throwable t) {
      System.err.println("mr-peer: bad arguments " + Arrays.toString(argv) + ": " + t);
      Runtime.getRuntime().halt(2);
      return;
    }

    Map<String, Object> info;
    try {
      mode.start();
      mode.writeConf(confDir);
      info = mode.ready();
    } catch (Throwable t) {
      System.err.println("mr-peer: startup failed");
      t.printStackTrace(System.err);
      stop(mode, 3);
      return;
    }
    info.put("mode", argv[0]);
    info.put("conf_dir", confDir.toString());
    info.put("pid", ProcessHandle.current().pid());
    info.put("startup_ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    ready = true;
    out.println("READY " + Json.write(info));

    while (true) {
      String line = lines.take();
      if (line == EOF) {
        break;
      }
      line = line.trim();
      if (line.isEmpty()) {
        continue;
      }
      String[] words = line.split("\\s+");
      Map<String, Object> reply;
      try {
        Map<String, Object> r = mode.command(words[0], Arrays.copyOfRange(words, 1, words.length));
        reply = Json.obj("ok", true);
        reply.putAll(r);
      } catch (Throwable t) {
        System.err.println("mr-peer: command failed: " + line);
        t.printStackTrace(System.err);
        reply = Json.obj("ok", false, "error", describe(t));
        reply.put("exception_class", t.getClass().getName());
        reply.put("message", t.getMessage());
      }
      out.println(Json.write(reply));
    }
    stop(mode, 0);
  }

  private static void readStdin(BlockingQueue<String> lines) {
    try (BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      String l;
      while ((l = in.readLine()) != null) {
        lines.add(l);
      }
    } catch (Exception e) {
      System.err.println("mr-peer: stdin: " + e);
    }
    lines.add(EOF);
    if (!ready) {
      System.err.println("mr-peer: stdin closed before READY; exiting");
      if (deleteOnExit != null) {
        deleteTree(deleteOnExit);
      }
      Runtime.getRuntime().halt(4);
    }
  }

  /** Stops the mode within 60 s, then ends the JVM without Hadoop's shutdown hooks. */
  private static void stop(PeerMode mode, int code) {
    Thread t = new Thread(() -> {
      try {
        mode.close();
      } catch (Throwable e) {
        System.err.println("mr-peer: close failed");
        e.printStackTrace(System.err);
      }
    }, "mr-peer-close");
    t.setDaemon(true);
    t.start();
    try {
      t.join(TimeUnit.SECONDS.toMillis(60));
    } catch (InterruptedException ignored) {
      Thread.currentThread().interrupt();
    }
    if (t.isAlive()) {
      System.err.println("mr-peer: close did not finish in 60 s; halting");
      code = code == 0 ? 5 : code;
    } else if (deleteOnExit != null) {
      deleteTree(deleteOnExit);
    }
    System.err.flush();
    Runtime.getRuntime().halt(code);
  }

  static void deleteTree(Path root) {
    try (java.util.stream.Stream<Path> walk = Files.walk(root)) {
      walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (Exception e) {
      System.err.println("mr-peer: could not delete " + root + ": " + e);
    }
  }

  static String describe(Throwable t) {
    String msg = t.getMessage();
    return t.getClass().getName() + (msg == null ? "" : ": " + msg.lines().findFirst().orElse(""));
  }
}
