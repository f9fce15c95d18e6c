package hotpath.peer;

/**
 * Log-linear histogram of nanosecond latencies: 16 sub-buckets per power of two (about 6 %
 * resolution). Not thread-safe: one per thread, merged at the end.
 */
final class LatencyHistogram {
  private static final int SUB = 16;
  private final long[] counts = new long[64 * SUB];
  private long total;
  private long max;

  void record(long nanos) {
    long v = Math.max(0, nanos);
    counts[index(v)]++;
    total++;
    max = Math.max(max, v);
  }

  private static int index(long v) {
    if (v < SUB) {
      return (int) v;
    }
    int e = 63 - Long.numberOfLeadingZeros(v);
    int sub = (int) ((v >>> (e - 4)) & (SUB - 1));
    return (e - 3) * SUB + sub;
  }

  /** The largest value that maps to bucket {@code i}. */
  private static long upper(int i) {
    if (i < SUB) {
      return i;
    }
    int e = i / SUB + 3;
    long sub = i % SUB;
    return ((SUB + sub + 1) << (e - 4)) - 1;
  }

  void merge(LatencyHistogram o) {
    for (int i = 0; i < counts.length; i++) {
      counts[i] += o.counts[i];
    }
    total += o.total;
    max = Math.max(max, o.max);
  }

  long count() {
    return total;
  }

  /** The value at quantile q (0..1), rounded up to its bucket's upper bound. */
  long quantile(double q) {
    if (total == 0) {
      return 0;
    }
    long rank = (long) Math.ceil(q * total);
    long seen = 0;
    for (int i = 0; i < counts.length; i++) {
      seen += counts[i];
      if (seen >= rank) {
        return Math.min(upper(i), max);
      }
    }
    return max;
  }

  long max() {
    return max;
  }

  java.util.Map<String, Object> summaryMicros() {
    return Json.obj(
        "p50", quantile(0.50) / 1000.0,
        "p90", quantile(0.90) / 1000.0,
        "p99", quantile(0.99) / 1000.0,
        "p999", quantile(0.999) / 1000.0,
        "max", max / 1000.0);
  }
}
