package hotpath.peer;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.io.PrintStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;

/** Shared by the measuring drivers: configuration, CPU time, the one-line JSON result. */
final class DriverSupport {
  private DriverSupport() {}

  /**
   * The client configuration: core-site.xml and hdfs-site.xml from {@code --conf-dir}, else from
   * $HADOOP_CONF_DIR.
   */
  static Configuration conf(Args args) {
    String dir = args.get("conf-dir", System.getenv("HADOOP_CONF_DIR"));
    if (dir == null) {
      throw new IllegalArgumentException("--conf-dir or HADOOP_CONF_DIR is required");
    }
    Configuration conf = new HdfsConfiguration();
    for (String f : new String[] {"core-site.xml", "hdfs-site.xml"}) {
      File file = new File(dir, f);
      if (!file.isFile()) {
        throw new IllegalArgumentException(file + " does not exist");
      }
      conf.addResource(new org.apache.hadoop.fs.Path(file.toURI()));
    }
    for (String[] kv : args.sets) {
      conf.set(kv[0], kv[1]);
    }
    return conf;
  }

  /**
   * With {@code --principal P --keytab K} (and {@code --krb5-conf F}, MIT's krb5.conf for the
   * JDK): logs the process in from the keytab ({@code UserGroupInformation.loginUserFromKeytab})
   * under {@code conf}'s security settings. Without {@code --keytab}: nothing, the usual login.
   */
  static void loginIfAsked(Args args, Configuration conf) throws java.io.IOException {
    if (!args.has("keytab")) {
      return;
    }
    if (args.has("krb5-conf")) {
      System.setProperty("java.security.krb5.conf", args.get("krb5-conf", null));
    }
    org.apache.hadoop.security.UserGroupInformation.setConfiguration(conf);
    org.apache.hadoop.security.UserGroupInformation.loginUserFromKeytab(
        args.require("principal"), args.get("keytab", null));
  }

  /** CPU time of the whole process (all threads: workers, IPC, GC, JIT), in nanoseconds. */
  static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean)
        ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
  }

  /** Ends a failed driver: the stack trace, then one summary line last on stderr; exit 1. */
  static void fail(Throwable t) {
    t.printStackTrace(System.err);
    System.err.println("driver failed: " + Launcher.describe(t));
    System.err.flush();
    Runtime.getRuntime().halt(1);
  }

  /** Keeps stdout for the result line only; everything else goes to stderr. */
  static PrintStream takeStdout() {
    PrintStream out =
        new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    return out;
  }
}
