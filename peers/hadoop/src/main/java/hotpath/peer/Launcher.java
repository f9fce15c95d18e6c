package hotpath.peer;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.util.ExitUtil;
import org.apache.log4j.Level;
import org.apache.log4j.LogManager;

/**
 * The test peer's entry point: {@code Launcher MODE --conf-dir DIR [options]}.
 *
 * <p>Protocol: the launcher starts the mode's services, writes the site XMLs into the conf dir,
 * prints one stdout line {@code READY {json}}, then answers each stdin line (one command) with one
 * JSON line on stdout. End of stdin stops everything and exits. Everything else (all Hadoop
 * logging, System.out included) goes to stderr.
 */
public final class Launcher {
  /** End-of-stdin marker in the line queue (compared by identity, never equal to a read line). */
  private static final String EOF = new String("EOF");

  /** Set just before the READY line; until then, end of stdin halts the JVM at once. */
  private static volatile boolean ready;

  /** --delete-on-exit: a directory (the caller's temp dir) to remove once everything stopped. */
  private static volatile Path deleteOnExit;

  private Launcher() {}

  public static void main(String[] argv) throws Exception {
    PrintStream out =
        new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    ExitUtil.disableSystemExit();
    ExitUtil.disableSystemHalt();

    // stdin is read from the start, so that the parent's death (EOF) also ends a slow startup.
    BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    Thread reader = new Thread(() -> readStdin(lines), "peer-stdin");
    reader.setDaemon(true);
    reader.start();

    long t0 = System.nanoTime();
    Mode mode;
    Path confDir;
    try {
      Args args = Args.parse(argv, 0);
      for (String l : args.logLevels) {
        int eq = l.indexOf('=');
        if (eq < 0) {
          LogManager.getRootLogger().setLevel(Level.toLevel(l));
        } else {
          LogManager.getLogger(l.substring(0, eq)).setLevel(Level.toLevel(l.substring(eq + 1)));
        }
      }
      confDir = Paths.get(args.require("conf-dir")).toAbsolutePath();
      Path workDir = Paths.get(args.get("work-dir", confDir + ".work")).toAbsolutePath();
      deleteOnExit = args.has("delete-on-exit")
          ? Paths.get(args.get("delete-on-exit", "")).toAbsolutePath() : null;
      Files.createDirectories(confDir);
      Files.createDirectories(workDir);
      System.setProperty("test.build.data", workDir.toString());
      System.setProperty("hadoop.tmp.dir", workDir.resolve("tmp").toString());
      mode = switch (args.mode) {
        case "hdfs" -> new HdfsMode(args, workDir, false);
        case "hdfs-ha" -> new HdfsMode(args, workDir, true);
        case "yarn-rm" -> new YarnRmMode(args, workDir);
        case "yarn-rm-ha" -> new YarnRmHaMode(args, workDir);
        case "yarn-nm" -> new YarnNmMode(args, workDir);
        case "yarn-client" -> new YarnClientMode(args, workDir);
        case "sasl" -> new SaslMode(args);
        default -> throw new IllegalArgumentException("unknown mode " + args.mode
            + " (hdfs, hdfs-ha, yarn-rm, yarn-rm-ha, yarn-nm, yarn-client, sasl)");
      };
    } catch (Throwable t) {
      System.err.println("peer: bad arguments " + Arrays.toString(argv) + ": " + t);
      Runtime.getRuntime().halt(2);
      return;
    }

    Map<String, Object> info;
    try {
      mode.start();
      mode.writeConf(confDir);
      info = mode.ready();
    } catch (Throwable t) {
      System.err.println("peer: startup failed");
      t.printStackTrace(System.err);
      stop(mode, 3, null);
      return;
    }
    info.put("mode", argv[0]);
    info.put("conf_dir", confDir.toString());
    info.put("pid", ProcessHandle.current().pid());
    info.put("startup_ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    Launcher.ready = true;
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
        System.err.println("peer: command failed: " + line);
        t.printStackTrace(System.err);
        Throwable u = unwrap(t);
        reply = Json.obj("ok", false, "error", describe(u));
        reply.putAll(exception(u));
      }
      out.println(Json.write(reply));
    }
    stop(mode, 0, deleteOnExit);
  }

  private static void readStdin(BlockingQueue<String> lines) {
    try (BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      String l;
      while ((l = in.readLine()) != null) {
        lines.add(l);
      }
    } catch (Exception e) {
      System.err.println("peer: stdin: " + e);
    }
    lines.add(EOF);
    // A parent that dies while we start up never sees READY: end now rather than finish startup.
    if (!ready) {
      System.err.println("peer: stdin closed before READY; exiting");
      if (deleteOnExit != null) {
        deleteTree(deleteOnExit);
      }
      Runtime.getRuntime().halt(4);
    }
  }

  /** Stops the mode with a deadline, then ends the JVM without running Hadoop's shutdown hooks. */
  private static void stop(Mode mode, int code, Path deleteOnExit) {
    Thread t = new Thread(() -> {
      try {
        mode.close();
      } catch (Throwable e) {
        System.err.println("peer: close failed");
        e.printStackTrace(System.err);
      }
    }, "peer-close");
    t.setDaemon(true);
    t.start();
    try {
      t.join(TimeUnit.SECONDS.toMillis(60));
    } catch (InterruptedException ignored) {
      Thread.currentThread().interrupt();
    }
    if (t.isAlive()) {
      System.err.println("peer: close did not finish in 60 s; halting");
      code = code == 0 ? 5 : code;
    } else {
      System.err.println("peer: stopped");
      if (deleteOnExit != null) {
        // the caller may be gone (stdin EOF after its death): clean its temp dir here
        deleteTree(deleteOnExit);
      }
    }
    System.err.flush();
    Runtime.getRuntime().halt(code);
  }

  private static void deleteTree(Path root) {
    try (java.util.stream.Stream<Path> walk = Files.walk(root)) {
      walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (Exception e) {
      System.err.println("peer: could not delete " + root + ": " + e);
    }
  }

  /** The throwable a reflective or privileged call wrapped around the real one. */
  static Throwable unwrap(Throwable t) {
    while ((t instanceof java.lang.reflect.UndeclaredThrowableException
        || t instanceof java.lang.reflect.InvocationTargetException
        || t instanceof java.security.PrivilegedActionException) && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  /**
   * The error reply's exception fields: {@code exception_class} (for a RemoteException the
   * server-side class it names), {@code message} (the whole getMessage()), the same for the
   * cause, {@code remote} (a RemoteException anywhere in the cause chain: the other side said it)
   * and, for a RemoteException, its RPC {@code error_code}.
   */
  static Map<String, Object> exception(Throwable t) {
    Map<String, Object> m = new java.util.LinkedHashMap<>();
    m.put("exception_class", className(t));
    m.put("message", t.getMessage());
    Throwable c = t.getCause();
    m.put("cause_class", c == null ? null : className(c));
    m.put("cause_message", c == null ? null : c.getMessage());
    boolean remote = false;
    for (Throwable x = t; x != null && !remote; x = x.getCause() == x ? null : x.getCause()) {
      if (x instanceof org.apache.hadoop.ipc.RemoteException re) {
        remote = true;
        if (re.getErrorCode() != null) {
          m.put("error_code", re.getErrorCode().name());
        }
      }
    }
    m.put("remote", remote);
    return m;
  }

  private static String className(Throwable t) {
    return t instanceof org.apache.hadoop.ipc.RemoteException re
        ? re.getClassName() : t.getClass().getName();
  }

  static String describe(Throwable t) {
    String msg = t.getMessage();
    String first = t.getClass().getName() + (msg == null ? "" : ": " + msg.lines().findFirst().orElse(""));
    return first;
  }
}
