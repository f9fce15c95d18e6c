package hotpath.peer;

import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * {@code FileStatusDriver --threads T --files N --dir D [--prefix F] [--rate OPS_PER_S]
 * [--duration S] [--warmup S] [--conf-dir DIR] [--principal P --keytab K [--krb5-conf F]]}: T
 * threads call {@code FileSystem.getFileStatus(D/<F><i>)} (F default {@code f}) over the files
 * made by {@code mkfiles D N} (NNThroughputBenchmark's remote "fileStatus" idea) and print one JSON
 * line: ops, ops/s, client CPU, latency quantiles. With {@code --rate} each thread offers rate/T
 * calls per second on a fixed schedule, and latency counts from the scheduled start. With
 * {@code --keytab} the JVM first logs in from it ({@link DriverSupport#loginIfAsked}).
 */
public final class FileStatusDriver {
  private FileStatusDriver() {}

  public static void main(String[] argv) {
    PrintStream out = DriverSupport.takeStdout();
    try {
      run(argv, out);
    } catch (Throwable t) {
      DriverSupport.fail(t);
    }
  }

  private static void run(String[] argv, PrintStream out) throws Exception {
    Args args = Args.parse(prepend("filestatus", argv), 0);
    int threads = args.getInt("threads", 1);
    int files = args.getInt("files", 1);
    String dir = args.require("dir");
    String prefix = args.get("prefix", "f");
    double rate = Double.parseDouble(args.get("rate", "0"));
    double duration = Double.parseDouble(args.get("duration", "10"));
    double warmup = Double.parseDouble(args.get("warmup", "2"));
    if (threads < 1 || files < 1 || duration <= 0) {
      throw new IllegalArgumentException("--threads, --files and --duration must be positive");
    }
    Configuration conf = DriverSupport.conf(args);
    DriverSupport.loginIfAsked(args, conf);
    FileSystem fs = FileSystem.get(conf);
    Path[] paths = new Path[files];
    for (int i = 0; i < files; i++) {
      paths[i] = new Path(dir, prefix + i);
    }
    // one call first: fails fast on a wrong directory and opens the connection
    fs.getFileStatus(paths[0]);

    ThreadMXBean tmx = ManagementFactory.getThreadMXBean();
    long warmupNanos = (long) (warmup * 1e9);
    long runNanos = (long) (duration * 1e9);
    long start = System.nanoTime() + 50_000_000L;
    long measureFrom = start + warmupNanos;
    long end = measureFrom + runNanos;
    double perThreadRate = rate > 0 ? rate / threads : 0;

    AtomicLong ops = new AtomicLong();
    AtomicLong errors = new AtomicLong();
    AtomicLong workerCpu = new AtomicLong();
    AtomicReference<String> firstError = new AtomicReference<>();
    List<LatencyHistogram> hists = new ArrayList<>();
    CountDownLatch done = new CountDownLatch(threads);
    long[] cpuAtMeasure = new long[1];
    for (int t = 0; t < threads; t++) {
      LatencyHistogram h = new LatencyHistogram();
      hists.add(h);
      final int id = t;
      Thread th = new Thread(() -> {
        long myCpuStart = -1;
        long n = 0;
        long k = id;
        long interval = perThreadRate > 0 ? (long) (1e9 / perThreadRate) : 0;
        // spread the threads' schedules over one interval
        long next = start + (interval > 0 ? interval * id / threads : 0);
        try {
          while (true) {
            long now = System.nanoTime();
            if (interval > 0) {
              while (now < next) {
                LockSupport.parkNanos(next - now);
                now = System.nanoTime();
              }
            }
            long issued = interval > 0 ? next : now;
            if (issued >= end) {
              break;
            }
            boolean measuring = issued >= measureFrom;
            if (measuring && myCpuStart < 0) {
              myCpuStart = tmx.getCurrentThreadCpuTime();
            }
            try {
              FileStatus st = fs.getFileStatus(paths[(int) (k % files)]);
              if (st == null) {
                throw new IllegalStateException("null status");
              }
              if (measuring) {
                h.record(System.nanoTime() - issued);
                n++;
              }
            } catch (Exception e) {
              errors.incrementAndGet();
              firstError.compareAndSet(null, e.toString());
            }
            k += threads;
            if (interval > 0) {
              next += interval;
            }
          }
        } finally {
          if (myCpuStart >= 0) {
            workerCpu.addAndGet(tmx.getCurrentThreadCpuTime() - myCpuStart);
          }
          ops.addAndGet(n);
          done.countDown();
        }
      }, "filestatus-" + t);
      th.setDaemon(true);
      th.start();
    }
    // process CPU over the measured window only
    long wait = measureFrom - System.nanoTime();
    if (wait > 0) {
      Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
    }
    cpuAtMeasure[0] = DriverSupport.processCpuNanos();
    long wallFrom = System.nanoTime();
    done.await();
    long wall = System.nanoTime() - wallFrom;
    long cpu = DriverSupport.processCpuNanos() - cpuAtMeasure[0];

    LatencyHistogram all = new LatencyHistogram();
    for (LatencyHistogram h : hists) {
      all.merge(h);
    }
    long n = ops.get();
    double secs = wall / 1e9;
    Map<String, Object> r = Json.obj(
        "driver", "filestatus",
        "threads", threads,
        "files", files,
        "dir", dir,
        "offered_rate", rate > 0 ? rate : null,
        "duration_s", secs,
        "ops", n,
        "ops_per_s", n / secs,
        "errors", errors.get(),
        "first_error", firstError.get(),
        "cpu_s", cpu / 1e9,
        "cpu_us_per_call", n == 0 ? null : cpu / 1e3 / n,
        "worker_cpu_s", workerCpu.get() / 1e9,
        "latency_us", all.summaryMicros());
    out.println(Json.write(r));
    out.flush();
    Runtime.getRuntime().halt(n > 0 ? 0 : 1);
  }

  static String[] prepend(String first, String[] rest) {
    String[] a = new String[rest.length + 1];
    a[0] = first;
    System.arraycopy(rest, 0, a, 1, rest.length);
    return a;
  }
}
