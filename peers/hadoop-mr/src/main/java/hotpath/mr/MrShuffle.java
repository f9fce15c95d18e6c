package hotpath.mr;

import java.io.DataInputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.net.HttpURLConnection;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;
import javax.crypto.SecretKey;
import javax.net.ssl.HttpsURLConnection;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapred.ShuffleHandler;
import org.apache.hadoop.mapreduce.security.SecureShuffleUtils;
import org.apache.hadoop.mapreduce.security.token.JobTokenSecretManager;
import org.apache.hadoop.mapreduce.task.reduce.ShuffleHeader;
import org.apache.hadoop.security.ssl.SSLFactory;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.api.ApplicationInitializationContext;
import org.apache.hadoop.yarn.server.api.ApplicationTerminationContext;
import org.apache.hadoop.yarn.server.api.AuxiliaryLocalPathHandler;

/**
 * {@code mr-shuffle}: Hadoop 3.5.0's own {@link ShuffleHandler} (the {@code mapreduce_shuffle}
 * aux service class) hosted standalone, as a NodeManager hosts it, for the shuffle benchmark and
 * differential tests; and Hadoop's Fetcher-side client code to fetch from any shuffle server.
 *
 * <p>Start: a {@link YarnConfiguration} with {@code mapreduce.shuffle.port=0} (overridable),
 * {@code yarn.nodemanager.local-dirs} = {@code --local-dirs} and every {@code --set}; a local path
 * handler that searches the local dirs as the NM's {@code LocalDirsHandlerService} does (each
 * relative path in every dir, first hit wins, else {@code Could not find <path> in any of the
 * directories}); then {@code init}, {@code start}, and the bound port read back from the
 * service's configuration. READY carries {@code port}.
 *
 * <p>Commands:
 * <ul>
 *   <li>{@code ping} → {@code {}}
 *   <li>{@code init-app USER APP_ID SERVICE_DATA_HEX}: {@code initializeApplication} with the
 *       bytes of {@code service_data["mapreduce_shuffle"]} (a job Token Writable), as the NM
 *       calls it at each task container's init
 *   <li>{@code stop-app APP_ID}: {@code stopApplication}
 *   <li>{@code fetch URL SECRET_HEX [ssl-conf-dir=DIR]}: one request as the 3.5.0 Fetcher makes
 *       it: {@code UrlHash} over {@code SecureShuffleUtils.buildMsgFrom(url)}, headers
 *       {@code name}/{@code version}; over HTTPS with Hadoop's {@code SSLFactory(CLIENT)} reading
 *       {@code ssl-client.xml} from DIR (socket factory and hostname verifier, as the Fetcher
 *       sets them); the reply's {@code ReplyHash} checked with {@code verifyReply}, then each
 *       {@code ShuffleHeader} read with its own {@code readFields} and its segment read whole →
 *       {@code status}, {@code maps} [{{@code map}, {@code part_length}, {@code raw_length},
 *       {@code reduce}, {@code crc32} of the segment, {@code trailer_ok} (the segment's last 4
 *       bytes are the CRC32 of the rest, as IFile writes)}]; a non-200 answer gives
 *       {@code status} and {@code body}.
 * </ul>
 */
final class MrShuffle implements PeerMode {
  private final List<String[]> sets;
  private final String localDirs;
  private ShuffleHandler handler;
  private int port;

  MrShuffle(List<String[]> sets, Map<String, String> single, Path workDir) {
    this.sets = sets;
    String dirs = single.get("local-dirs");
    this.localDirs = dirs != null ? dirs : workDir.resolve("nm-local").toString();
  }

  @Override
  public void start() throws Exception {
    YarnConfiguration conf = new YarnConfiguration();
    conf.setInt(ShuffleHandler.SHUFFLE_PORT_CONFIG_KEY, 0);
    conf.set(YarnConfiguration.NM_LOCAL_DIRS, localDirs);
    for (String[] kv : sets) {
      conf.set(kv[0], kv[1]);
    }
    List<Path> dirs = new ArrayList<>();
    for (String d : localDirs.split(",")) {
      if (!d.isBlank()) {
        dirs.add(Paths.get(d.trim()).toAbsolutePath());
      }
    }
    handler = new ShuffleHandler();
    handler.setAuxiliaryLocalPathHandler(new LocalDirs(dirs));
    handler.init(conf);
    handler.start();
    port = handler.getConfig().getInt(ShuffleHandler.SHUFFLE_PORT_CONFIG_KEY, -1);
    if (port <= 0) {
      throw new IllegalStateException("ShuffleHandler reported port " + port);
    }
  }

  @Override
  public void writeConf(Path confDir) {}

  @Override
  public Map<String, Object> ready() {
    return Json.obj("port", port, "local_dirs", localDirs);
  }

  @Override
  public Map<String, Object> command(String name, String[] args) throws Exception {
    switch (name) {
      case "ping":
        return Json.obj();
      case "init-app": {
        need(args, 3, "init-app USER APP_ID SERVICE_DATA_HEX");
        ByteBuffer data = ByteBuffer.wrap(HexFormat.of().parseHex(args[2]));
        handler.initializeApplication(
            new ApplicationInitializationContext(args[0], ApplicationId.fromString(args[1]), data));
        return Json.obj();
      }
      case "stop-app":
        need(args, 1, "stop-app APP_ID");
        handler.stopApplication(new ApplicationTerminationContext(ApplicationId.fromString(args[0])));
        return Json.obj();
      case "fetch":
        need(args, 2, "fetch URL SECRET_HEX [ssl-conf-dir=DIR]");
        return fetch(args);
      default:
        throw new IllegalArgumentException("unknown command " + name);
    }
  }

  private static void need(String[] args, int n, String usage) {
    if (args.length < n) {
      throw new IllegalArgumentException("usage: " + usage);
    }
  }

  private static Map<String, Object> fetch(String[] args) throws Exception {
    URL url = new URL(args[0]);
    SecretKey key = JobTokenSecretManager.createSecretKey(HexFormat.of().parseHex(args[1]));
    String sslDir = null;
    for (int i = 2; i < args.length; i++) {
      if (args[i].startsWith("ssl-conf-dir=")) {
        sslDir = args[i].substring("ssl-conf-dir=".length());
      }
    }
    HttpURLConnection conn = (HttpURLConnection) url.openConnection();
    SSLFactory ssl = null;
    if (conn instanceof HttpsURLConnection https) {
      if (sslDir == null) {
        throw new IllegalArgumentException("an https URL needs ssl-conf-dir=DIR (ssl-client.xml)");
      }
      ssl = clientSslFactory(Paths.get(sslDir));
      https.setSSLSocketFactory(ssl.createSSLSocketFactory());
      https.setHostnameVerifier(ssl.getHostnameVerifier());
    }
    try {
      String msg = SecureShuffleUtils.buildMsgFrom(url);
      String encHash = SecureShuffleUtils.hashFromString(msg, key);
      conn.addRequestProperty(SecureShuffleUtils.HTTP_HEADER_URL_HASH, encHash);
      conn.setReadTimeout(60_000);
      conn.setConnectTimeout(60_000);
      conn.addRequestProperty(ShuffleHeader.HTTP_HEADER_NAME, ShuffleHeader.DEFAULT_HTTP_HEADER_NAME);
      conn.addRequestProperty(
          ShuffleHeader.HTTP_HEADER_VERSION, ShuffleHeader.DEFAULT_HTTP_HEADER_VERSION);
      conn.connect();
      int rc = conn.getResponseCode();
      if (rc != HttpURLConnection.HTTP_OK) {
        InputStream err = conn.getErrorStream();
        String body = err == null ? "" : new String(err.readAllBytes(), "UTF-8");
        return Json.obj("status", rc, "body", body);
      }
      if (!ShuffleHeader.DEFAULT_HTTP_HEADER_NAME.equals(
              conn.getHeaderField(ShuffleHeader.HTTP_HEADER_NAME))
          || !ShuffleHeader.DEFAULT_HTTP_HEADER_VERSION.equals(
              conn.getHeaderField(ShuffleHeader.HTTP_HEADER_VERSION))) {
        throw new IOException("Incompatible shuffle response version");
      }
      String replyHash = conn.getHeaderField(SecureShuffleUtils.HTTP_HEADER_REPLY_URL_HASH);
      if (replyHash == null) {
        throw new IOException("security validation of TT Map output failed");
      }
      SecureShuffleUtils.verifyReply(replyHash, encHash, key);
      List<Object> maps = new ArrayList<>();
      try (DataInputStream in = new DataInputStream(conn.getInputStream())) {
        while (true) {
          in.mark(1);
          ShuffleHeader h = new ShuffleHeader();
          try {
            h.readFields(in);
          } catch (java.io.EOFException end) {
            break;
          }
          long part = (Long) field(h, "compressedLength");
          byte[] seg = new byte[Math.toIntExact(part)];
          in.readFully(seg);
          CRC32 all = new CRC32();
          all.update(seg);
          boolean trailer = false;
          if (seg.length >= 4) {
            CRC32 c = new CRC32();
            c.update(seg, 0, seg.length - 4);
            long t = ((seg[seg.length - 4] & 0xffL) << 24) | ((seg[seg.length - 3] & 0xffL) << 16)
                | ((seg[seg.length - 2] & 0xffL) << 8) | (seg[seg.length - 1] & 0xffL);
            trailer = c.getValue() == t;
          }
          maps.add(Json.obj(
              "map", field(h, "mapId"),
              "part_length", part,
              "raw_length", field(h, "uncompressedLength"),
              "reduce", field(h, "forReduce"),
              "crc32", all.getValue(),
              "trailer_ok", trailer));
        }
      }
      return Json.obj("status", rc, "maps", maps);
    } finally {
      conn.disconnect();
      if (ssl != null) {
        ssl.destroy();
      }
    }
  }

  /**
   * Hadoop's client-side {@code SSLFactory} as the Fetcher builds it, reading
   * {@code ssl-client.xml} (a class-path resource to Hadoop) from {@code dir}: the factory's
   * configuration is created with this thread's context class loader, so that loader is one
   * that also sees {@code dir} while the factory initialises.
   */
  private static SSLFactory clientSslFactory(Path dir) throws Exception {
    Thread t = Thread.currentThread();
    ClassLoader old = t.getContextClassLoader();
    try (URLClassLoader cl = new URLClassLoader(new URL[] {dir.toUri().toURL()}, old)) {
      t.setContextClassLoader(cl);
      Configuration conf = new Configuration();
      SSLFactory f = new SSLFactory(SSLFactory.Mode.CLIENT, conf);
      f.init();
      return f;
    } finally {
      t.setContextClassLoader(old);
    }
  }

  private static Object field(Object o, String name) throws Exception {
    Field f = o.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(o);
  }

  @Override
  public void close() throws Exception {
    if (handler != null) {
      handler.stop();
    }
  }

  /** The NM's local-dir lookup ({@code LocalDirsHandlerService}), over fixed, healthy dirs. */
  private static final class LocalDirs implements AuxiliaryLocalPathHandler {
    private final List<Path> dirs;

    LocalDirs(List<Path> dirs) {
      this.dirs = dirs;
    }

    @Override
    public org.apache.hadoop.fs.Path getLocalPathForRead(String path) throws IOException {
      for (Path d : dirs) {
        File f = d.resolve(path).toFile();
        if (f.exists()) {
          return new org.apache.hadoop.fs.Path(f.getAbsolutePath());
        }
      }
      throw new IOException("Could not find " + path + " in any of the directories");
    }

    @Override
    public org.apache.hadoop.fs.Path getLocalPathForWrite(String path) throws IOException {
      return new org.apache.hadoop.fs.Path(dirs.get(0).resolve(path).toString());
    }

    @Override
    public org.apache.hadoop.fs.Path getLocalPathForWrite(String path, long size)
        throws IOException {
      return getLocalPathForWrite(path);
    }

    @Override
    public Iterable<org.apache.hadoop.fs.Path> getAllLocalPathsForRead(String path) {
      List<org.apache.hadoop.fs.Path> all = new ArrayList<>();
      for (Path d : dirs) {
        File f = d.resolve(path).toFile();
        if (f.exists()) {
          all.add(new org.apache.hadoop.fs.Path(f.getAbsolutePath()));
        }
      }
      return all;
    }
  }
}
