package hotpath.peer;

import java.io.InputStream;
import java.util.Arrays;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.server.namenode.NNThroughputBenchmark;

/**
 * {@code NnBenchDriver [--conf-dir DIR] [--set key=value]... [--principal P --keytab K
 * [--krb5-conf F]] -- NNTB_ARGS...}: Hadoop's own {@code NNThroughputBenchmark} (from the
 * minicluster jar, unchanged) in this JVM, with the client configuration of DIR and, with
 * {@code --keytab}, logged in from that keytab first ({@code UGI.loginUserFromKeytab}), e.g.
 * {@code -- -fs hdfs://HOST:PORT -op fileStatus -threads 16 -files N}. The benchmark logs its
 * phases and figures on stderr as it always does ({@code Starting N fileStatus(s).}, {@code ---
 * fileStatus stats ---}, {@code Ops per sec: X}). When it returns, stderr gets one more line,
 * {@code NNBENCH-DONE}, and the JVM stays (idle) until stdin closes, so that the process that
 * started it can still read this JVM's CPU time from /proc; then it exits 0.
 */
public final class NnBenchDriver {
  private NnBenchDriver() {}

  public static void main(String[] argv) {
    DriverSupport.takeStdout();
    try {
      int sep = Arrays.asList(argv).indexOf("--");
      if (sep < 0) {
        throw new IllegalArgumentException("usage: NnBenchDriver [options] -- NNTB_ARGS...");
      }
      Args args = Args.parse(
          FileStatusDriver.prepend("nnbench", Arrays.copyOfRange(argv, 0, sep)), 0);
      String[] bench = Arrays.copyOfRange(argv, sep + 1, argv.length);
      Configuration conf = DriverSupport.conf(args);
      DriverSupport.loginIfAsked(args, conf);
      NNThroughputBenchmark.runBenchmark(conf, bench);
      // on stderr, after the benchmark's own log lines: the reader sees them in order
      System.err.println("NNBENCH-DONE");
      System.err.flush();
      InputStream in = System.in;
      while (in.read() >= 0) {
        // wait for stdin to close
      }
      Runtime.getRuntime().halt(0);
    } catch (Throwable t) {
      DriverSupport.fail(t);
    }
  }
}
