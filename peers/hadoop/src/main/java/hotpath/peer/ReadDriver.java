package hotpath.peer;

import java.io.PrintStream;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * {@code ReadDriver --path P [--buffer BYTES] [--runs N] [--warmup-runs W] [--sha256 true]
 * [--verify-checksum false] [--conf-dir DIR] [--principal P --keytab K [--krb5-conf F]]}:
 * (logged in from the keytab first on a Kerberized cluster) reads P sequentially through
 * {@code FileSystem.open} N times after W unmeasured runs, and prints one JSON line with bytes,
 * seconds, throughput and the process CPU per GB (10^9 bytes) over the measured runs.
 */
public final class ReadDriver {
  private ReadDriver() {}

  public static void main(String[] argv) {
    PrintStream out = DriverSupport.takeStdout();
    try {
      run(argv, out);
    } catch (Throwable t) {
      DriverSupport.fail(t);
    }
  }

  private static void run(String[] argv, PrintStream out) throws Exception {
    Args args = Args.parse(FileStatusDriver.prepend("read", argv), 0);
    Path path = new Path(args.require("path"));
    int bufSize = args.getInt("buffer", 1 << 20);
    int runs = args.getInt("runs", 1);
    int warmupRuns = args.getInt("warmup-runs", 0);
    boolean sha = Boolean.parseBoolean(args.get("sha256", "false"));
    Configuration conf = DriverSupport.conf(args);
    DriverSupport.loginIfAsked(args, conf);
    FileSystem fs = FileSystem.get(conf);
    fs.setVerifyChecksum(Boolean.parseBoolean(args.get("verify-checksum", "true")));
    byte[] buf = new byte[bufSize];

    for (int i = 0; i < warmupRuns; i++) {
      readOnce(fs, path, buf, null);
    }
    long bytes = 0;
    long cpu0 = DriverSupport.processCpuNanos();
    long t0 = System.nanoTime();
    List<Double> perRun = new ArrayList<>();
    String digest = null;
    for (int i = 0; i < runs; i++) {
      long r0 = System.nanoTime();
      MessageDigest md = sha && i == 0 ? MessageDigest.getInstance("SHA-256") : null;
      bytes += readOnce(fs, path, buf, md);
      perRun.add((System.nanoTime() - r0) / 1e9);
      if (md != null) {
        digest = HexFormat.of().formatHex(md.digest());
      }
    }
    double secs = (System.nanoTime() - t0) / 1e9;
    double cpu = (DriverSupport.processCpuNanos() - cpu0) / 1e9;
    double gb = bytes / 1e9;
    out.println(Json.write(Json.obj(
        "driver", "read",
        "path", path.toString(),
        "runs", runs,
        "bytes", bytes,
        "seconds", secs,
        "run_seconds", perRun,
        "gb_per_s", gb / secs,
        "gbit_per_s", gb * 8 / secs,
        "cpu_s", cpu,
        "cpu_s_per_gb", gb == 0 ? null : cpu / gb,
        "sha256", digest)));
    out.flush();
    Runtime.getRuntime().halt(0);
  }

  private static long readOnce(FileSystem fs, Path path, byte[] buf, MessageDigest md)
      throws Exception {
    long n = 0;
    try (FSDataInputStream in = fs.open(path, buf.length)) {
      int r;
      while ((r = in.read(buf, 0, buf.length)) > 0) {
        if (md != null) {
          md.update(buf, 0, r);
        }
        n += r;
      }
    }
    return n;
  }
}
