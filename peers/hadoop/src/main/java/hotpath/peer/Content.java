package hotpath.peer;

/**
 * The known file content of {@code write}: byte {@code i} of a file is byte {@code i % 8}
 * (little-endian) of {@code splitmix64(i / 8)}, so any range can be regenerated on its own.
 * The Rust twin is {@code peer_harness::content}.
 */
final class Content {
  private Content() {}

  static long splitmix64(long x) {
    long z = (x + 1) * 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** Fills {@code buf[0..len)} with the content starting at file offset {@code offset}. */
  static void fill(byte[] buf, int len, long offset) {
    int i = 0;
    while (i < len) {
      long pos = offset + i;
      long word = splitmix64(pos >>> 3);
      for (int b = (int) (pos & 7); b < 8 && i < len; b++, i++) {
        buf[i] = (byte) (word >>> (b * 8));
      }
    }
  }
}
