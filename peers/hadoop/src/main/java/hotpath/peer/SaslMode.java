package hotpath.peer;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PrivilegedExceptionAction;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.ipc.Server;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.SaslRpcServer;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.security.token.TokenIdentifier;
import org.apache.hadoop.yarn.api.ContainerManagementProtocol;
import org.apache.hadoop.yarn.api.protocolrecords.CommitResponse;
import org.apache.hadoop.yarn.api.protocolrecords.ContainerUpdateRequest;
import org.apache.hadoop.yarn.api.protocolrecords.ContainerUpdateResponse;
import org.apache.hadoop.yarn.api.protocolrecords.GetContainerStatusesRequest;
import org.apache.hadoop.yarn.api.protocolrecords.GetContainerStatusesResponse;
import org.apache.hadoop.yarn.api.protocolrecords.GetLocalizationStatusesRequest;
import org.apache.hadoop.yarn.api.protocolrecords.GetLocalizationStatusesResponse;
import org.apache.hadoop.yarn.api.protocolrecords.IncreaseContainersResourceRequest;
import org.apache.hadoop.yarn.api.protocolrecords.IncreaseContainersResourceResponse;
import org.apache.hadoop.yarn.api.protocolrecords.ReInitializeContainerRequest;
import org.apache.hadoop.yarn.api.protocolrecords.ReInitializeContainerResponse;
import org.apache.hadoop.yarn.api.protocolrecords.ResourceLocalizationRequest;
import org.apache.hadoop.yarn.api.protocolrecords.ResourceLocalizationResponse;
import org.apache.hadoop.yarn.api.protocolrecords.RestartContainerResponse;
import org.apache.hadoop.yarn.api.protocolrecords.RollbackResponse;
import org.apache.hadoop.yarn.api.protocolrecords.SignalContainerRequest;
import org.apache.hadoop.yarn.api.protocolrecords.SignalContainerResponse;
import org.apache.hadoop.yarn.api.protocolrecords.StartContainersRequest;
import org.apache.hadoop.yarn.api.protocolrecords.StartContainersResponse;
import org.apache.hadoop.yarn.api.protocolrecords.StopContainersRequest;
import org.apache.hadoop.yarn.api.protocolrecords.StopContainersResponse;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.SerializedException;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.exceptions.YarnException;
import org.apache.hadoop.yarn.ipc.YarnRPC;
import org.apache.hadoop.yarn.security.NMTokenIdentifier;
import org.apache.hadoop.yarn.server.api.records.MasterKey;
import org.apache.hadoop.yarn.server.nodemanager.security.NMTokenSecretManagerInNM;
import org.apache.hadoop.yarn.server.security.BaseNMTokenSecretManager;
import org.apache.hadoop.yarn.server.security.MasterKeyData;
import org.apache.hadoop.yarn.util.ConverterUtils;
import org.apache.hadoop.yarn.util.Records;

/**
 * {@code sasl --nm-key-id N --nm-key HEX}: Hadoop's and the JDK's own SASL / DIGEST-MD5 / token
 * code, for byte-level checks of ours.
 *
 * <p>Three Hadoop IPC servers serve ContainerManagementProtocol with TOKEN as the only
 * authentication (forced as the NodeManager's ContainerManagerImpl does), one per
 * {@code hadoop.rpc.protection} level; each has its own real {@link NMTokenSecretManagerInNM}
 * holding the shared master key and that server's NodeId (the NM checks the identifier's node).
 * Commands mint NMTokens with Hadoop's {@link BaseNMTokenSecretManager}, read and write
 * Credentials files, run a Java IPC client against any address, and drive plain
 * {@code javax.security.sasl} DIGEST-MD5 sessions ({@link JdkSasl}).
 */
final class SaslMode implements Mode {
  static final String[] PROTECTIONS = {"authentication", "integrity", "privacy"};
  static final String DEFAULT_CONTAINER = "container_1_0001_01_000001";
  private static final Base64.Encoder B64 = Base64.getEncoder();

  private final Args args;
  private final YarnConfiguration conf;
  private final int keyId;
  private final byte[] key;
  private final Map<String, Server> servers = new LinkedHashMap<>();
  private final JdkSasl jdk = new JdkSasl();

  SaslMode(Args args) {
    this.args = args;
    this.keyId = Integer.parseInt(args.require("nm-key-id"));
    this.key = HexFormat.of().parseHex(args.require("nm-key"));
    this.conf = new YarnConfiguration();
    for (String[] kv : args.sets) {
      conf.set(kv[0], kv[1]);
    }
  }

  @Override
  public void start() throws Exception {
    ContainerManagementProtocol impl = new WhoAmI();
    for (String protection : PROTECTIONS) {
      Configuration serverConf = new Configuration(conf);
      // as ContainerManagerImpl.serviceStart: always token-based
      serverConf.set(CommonConfigurationKeysPublic.HADOOP_SECURITY_AUTHENTICATION,
          SaslRpcServer.AuthMethod.TOKEN.toString());
      serverConf.set(CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION, protection);
      NMTokenSecretManagerInNM secrets = new NMTokenSecretManagerInNM();
      secrets.setMasterKey(masterKey(keyId, key));
      Server server = YarnRPC.create(serverConf).getServer(ContainerManagementProtocol.class, impl,
          new InetSocketAddress("127.0.0.1", 0), serverConf, secrets, 1);
      server.start();
      // the NM's own NodeId check, against this server's address (known once it is bound)
      secrets.setNodeId(NodeId.newInstance("127.0.0.1", server.getListenerAddress().getPort()));
      servers.put(protection, server);
    }
  }

  static MasterKey masterKey(int id, byte[] bytes) {
    MasterKey mk = Records.newRecord(MasterKey.class);
    mk.setKeyId(id);
    mk.setBytes(ByteBuffer.wrap(bytes.clone()));
    return mk;
  }

  @Override
  public Map<String, Object> ready() {
    Map<String, Object> s = new LinkedHashMap<>();
    for (Map.Entry<String, Server> e : servers.entrySet()) {
      s.put(e.getKey(), YarnRmMode.hostPort(e.getValue().getListenerAddress()));
    }
    return Json.obj("servers", s, "nm_key_id", keyId);
  }

  @Override
  public void writeConf(Path confDir) throws Exception {
    Map<String, String> c = new LinkedHashMap<>();
    for (String[] kv : args.sets) {
      c.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("core-site.xml"), c);
  }

  @Override
  public Map<String, Object> command(String name, String[] a) throws Exception {
    switch (name) {
      case "ping":
        return Json.obj();
      case "mint-nm-token":
        return mint(a);
      case "read-credentials":
        need(name, a, 1, 1, "FILE");
        return readCredentials(a[0]);
      case "call":
        need(name, a, 3, Integer.MAX_VALUE, "ADDR TOKENFILE PROTECTION [CONTAINER_ID ...]");
        return call(a);
      case "bench-connect":
        need(name, a, 4, 4, "ADDR TOKENFILE PROTECTION N");
        return benchConnect(a);
      default:
        if (name.startsWith("jdk-") || name.equals("bench-wrap")) {
          return jdk.command(name, a);
        }
        throw new IllegalArgumentException("unknown command " + name + " (sasl: ping, mint-nm-token,"
            + " read-credentials, call, bench-connect, bench-wrap, jdk-server-new, jdk-server-step,"
            + " jdk-client-new, jdk-client-step, jdk-wrap, jdk-unwrap, jdk-dispose)");
    }
  }

  static void need(String cmd, String[] a, int min, int max, String usage) {
    if (a.length < min || a.length > max) {
      throw new IllegalArgumentException("usage: " + cmd + " " + usage);
    }
  }

  /** Standard padded base64; the single argument "-" is the empty byte string. */
  static byte[] unb64(String s) {
    return s.equals("-") ? new byte[0] : Base64.getDecoder().decode(s);
  }

  static String b64(byte[] b) {
    return b == null ? null : B64.encodeToString(b);
  }

  static InetSocketAddress hostPort(String addr) {
    int colon = addr.lastIndexOf(':');
    if (colon <= 0) {
      throw new IllegalArgumentException("want HOST:PORT, got " + addr);
    }
    return new InetSocketAddress(addr.substring(0, colon), Integer.parseInt(addr.substring(colon + 1)));
  }

  // ---- tokens and credentials files ----

  /** RM-side NMToken minting: Hadoop's own createNMToken with a given current master key. */
  static final class Minter extends BaseNMTokenSecretManager {
    Minter(int keyId, byte[] key) {
      this.currentMasterKey = new MasterKeyData(masterKey(keyId, key), createSecretKey(key.clone()));
    }
  }

  /**
   * {@code mint-nm-token ADDR ATTEMPT_ID USER FILE [key-id=N] [key=HEX] [service=HOST:PORT]
   * [format=writable|protobuf]}.
   */
  private Map<String, Object> mint(String[] a) throws Exception {
    need("mint-nm-token", a, 4, 8, "ADDR ATTEMPT_ID USER FILE [key-id=N] [key=HEX]"
        + " [service=HOST:PORT] [format=writable|protobuf]");
    int useKeyId = keyId;
    byte[] useKey = key;
    String service = a[0];
    Credentials.SerializedFormat format = Credentials.SerializedFormat.WRITABLE;
    for (int i = 4; i < a.length; i++) {
      int eq = a[i].indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("mint-nm-token: option wants name=value, got " + a[i]);
      }
      String k = a[i].substring(0, eq);
      String v = a[i].substring(eq + 1);
      switch (k) {
        case "key-id" -> useKeyId = Integer.parseInt(v);
        case "key" -> useKey = HexFormat.of().parseHex(v);
        case "service" -> service = v;
        case "format" -> format = Credentials.SerializedFormat.valueOf(v.toUpperCase());
        default -> throw new IllegalArgumentException("mint-nm-token: unknown option " + k);
      }
    }
    InetSocketAddress nm = hostPort(a[0]);
    NodeId nodeId = NodeId.newInstance(nm.getHostString(), nm.getPort());
    ApplicationAttemptId attempt = ApplicationAttemptId.fromString(a[1]);
    org.apache.hadoop.yarn.api.records.Token yarnToken =
        new Minter(useKeyId, useKey).createNMToken(attempt, nodeId, a[2]);
    // as AMLauncher / AMs do: the yarn record becomes a Hadoop token for the NM's address
    Token<NMTokenIdentifier> token = ConverterUtils.convertFromYarn(yarnToken, hostPort(service));
    Credentials creds = new Credentials();
    creds.addToken(token.getService(), token);
    File file = new File(a[3]).getAbsoluteFile();
    creds.writeTokenStorageFile(new org.apache.hadoop.fs.Path(file.toURI()), conf, format);
    return Json.obj(
        "identifier", b64(token.getIdentifier()),
        "password", b64(token.getPassword()),
        "kind", token.getKind().toString(),
        "service", token.getService().toString(),
        "key_id", useKeyId,
        "node_id", nodeId.toString(),
        "format", format.name().toLowerCase(),
        "file", file.toString());
  }

  private Map<String, Object> readCredentials(String path) throws Exception {
    File file = new File(path);
    Credentials creds = Credentials.readTokenStorageFile(file, conf);
    List<Object> tokens = new ArrayList<>();
    for (Map.Entry<Text, Token<? extends TokenIdentifier>> e : creds.getTokenMap().entrySet()) {
      Token<? extends TokenIdentifier> t = e.getValue();
      Map<String, Object> m = Json.obj(
          "alias", e.getKey().toString(),
          "kind", t.getKind().toString(),
          "service", t.getService().toString(),
          "identifier", b64(t.getIdentifier()),
          "password", b64(t.getPassword()));
      if (NMTokenIdentifier.KIND.equals(t.getKind())) {
        try {
          NMTokenIdentifier id = nmIdentifier(t);
          m.put("nm_token", Json.obj(
              "app_attempt_id", String.valueOf(id.getApplicationAttemptId()),
              "node_id", String.valueOf(id.getNodeId()),
              "app_submitter", id.getApplicationSubmitter(),
              "key_id", id.getKeyId()));
        } catch (IOException | RuntimeException ex) {
          m.put("nm_token_error", Launcher.describe(ex));
        }
      }
      tokens.add(m);
    }
    List<Object> secrets = new ArrayList<>();
    for (Map.Entry<Text, byte[]> e : creds.getSecretKeyMap().entrySet()) {
      secrets.add(Json.obj("alias", e.getKey().toString(), "value", b64(e.getValue())));
    }
    int formatByte;
    try (InputStream in = Files.newInputStream(file.toPath())) {
      byte[] head = in.readNBytes(5);
      formatByte = head.length == 5 ? head[4] : -1;
    }
    String format = switch (formatByte) {
      case 0 -> "writable";
      case 1 -> "protobuf";
      default -> "unknown";
    };
    return Json.obj("tokens", tokens, "secrets", secrets, "format", format);
  }

  static NMTokenIdentifier nmIdentifier(Token<?> t) throws IOException {
    NMTokenIdentifier id = new NMTokenIdentifier();
    id.readFields(new DataInputStream(new ByteArrayInputStream(t.getIdentifier())));
    return id;
  }

  // ---- Java IPC client ----

  /** One finished {@code call}: the answer and when it came. */
  private record CallResult(Map<String, String> failed, long answerNanos, long stopNanos) {}

  /**
   * The whole of one client connection: a fresh UGI named after the NMToken's attempt, holding
   * the file's tokens; a proxy; one getContainerStatuses; stopProxy. {@code answerNanos} counts
   * from the UGI's creation to the answer, {@code stopNanos} the proxy's stop after it.
   */
  private CallResult callOnce(InetSocketAddress addr, Credentials creds, String user,
      Configuration clientConf, List<ContainerId> ids) throws Exception {
    long t0 = System.nanoTime();
    UserGroupInformation ugi = UserGroupInformation.createRemoteUser(user);
    ugi.addCredentials(creds);
    long[] marks = new long[1];
    GetContainerStatusesResponse r = doAs(ugi, () -> {
      YarnRPC rpc = YarnRPC.create(clientConf);
      ContainerManagementProtocol proxy = (ContainerManagementProtocol)
          rpc.getProxy(ContainerManagementProtocol.class, addr, clientConf);
      try {
        GetContainerStatusesResponse resp =
            proxy.getContainerStatuses(GetContainerStatusesRequest.newInstance(ids));
        marks[0] = System.nanoTime();
        return resp;
      } finally {
        rpc.stopProxy(proxy, clientConf);
      }
    });
    long t2 = System.nanoTime();
    Map<String, String> failed = new LinkedHashMap<>();
    for (Map.Entry<ContainerId, SerializedException> e : r.getFailedRequests().entrySet()) {
      failed.put(e.getKey().toString(), e.getValue().getMessage());
    }
    return new CallResult(failed, marks[0] - t0, t2 - marks[0]);
  }

  /** UGI.doAs without its UndeclaredThrowableException around a YarnException. */
  private static <T> T doAs(UserGroupInformation ugi, PrivilegedExceptionAction<T> action)
      throws Exception {
    try {
      return ugi.doAs(action);
    } catch (java.lang.reflect.UndeclaredThrowableException e) {
      Throwable c = e.getCause();
      if (c instanceof Exception ex) {
        throw ex;
      }
      throw e;
    }
  }

  private record CallSetup(InetSocketAddress addr, Credentials creds, String user,
      Configuration conf, List<ContainerId> ids) {}

  private CallSetup setup(String addr, String tokenFile, String protection, List<String> cids)
      throws Exception {
    Credentials creds = Credentials.readTokenStorageFile(new File(tokenFile), conf);
    String user = null;
    for (Token<? extends TokenIdentifier> t : creds.getAllTokens()) {
      if (NMTokenIdentifier.KIND.equals(t.getKind())) {
        user = nmIdentifier(t).getApplicationAttemptId().toString();
        break;
      }
    }
    if (user == null) {
      throw new IllegalArgumentException("no " + NMTokenIdentifier.KIND + " token in " + tokenFile);
    }
    Configuration c = new Configuration(conf);
    c.set(CommonConfigurationKeysPublic.HADOOP_RPC_PROTECTION, protection);
    // one attempt, bounded waits: a peer that never answers (a dropped bad MAC) fails the call
    c.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_KEY, 0);
    c.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_ON_SOCKET_TIMEOUTS_KEY, 0);
    c.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_TIMEOUT_KEY, 20_000);
    c.setInt(org.apache.hadoop.fs.CommonConfigurationKeys.IPC_CLIENT_RPC_TIMEOUT_KEY, 60_000);
    List<ContainerId> ids = new ArrayList<>();
    for (String s : cids.isEmpty() ? List.of(DEFAULT_CONTAINER) : cids) {
      ids.add(ContainerId.fromString(s));
    }
    return new CallSetup(hostPort(addr), creds, user, c, ids);
  }

  private Map<String, Object> call(String[] a) throws Exception {
    CallSetup s = setup(a[0], a[1], a[2], Arrays.asList(a).subList(3, a.length));
    CallResult r = callOnce(s.addr, s.creds, s.user, s.conf, s.ids);
    return Json.obj("failed", r.failed, "ms", r.answerNanos / 1e6, "stop_ms", r.stopNanos / 1e6,
        "user", s.user);
  }

  private Map<String, Object> benchConnect(String[] a) throws Exception {
    CallSetup s = setup(a[0], a[1], a[2], List.of());
    int n = Integer.parseInt(a[3]);
    if (n <= 0) {
      throw new IllegalArgumentException("bench-connect: N must be positive");
    }
    int warmup = Math.max(2, Math.min(20, n / 5));
    for (int i = 0; i < warmup; i++) {
      callOnce(s.addr, s.creds, s.user, s.conf, s.ids);
    }
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    LatencyHistogram h = new LatencyHistogram();
    long sum = 0;
    long min = Long.MAX_VALUE;
    long stopSum = 0;
    long cpu0 = os.getProcessCpuTime();
    long thread0 = threads.getCurrentThreadCpuTime();
    long wall0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      CallResult r = callOnce(s.addr, s.creds, s.user, s.conf, s.ids);
      h.record(r.answerNanos);
      sum += r.answerNanos;
      min = Math.min(min, r.answerNanos);
      stopSum += r.stopNanos;
    }
    long wall = System.nanoTime() - wall0;
    long cpu = os.getProcessCpuTime() - cpu0;
    long thread = threads.getCurrentThreadCpuTime() - thread0;
    return Json.obj(
        "n", n,
        "warmup", warmup,
        "mean_us", sum / 1e3 / n,
        "p50_us", h.quantile(0.50) / 1e3,
        "p99_us", h.quantile(0.99) / 1e3,
        "min_us", min / 1e3,
        "max_us", h.max() / 1e3,
        "stop_mean_us", stopSum / 1e3 / n,
        "process_cpu_us_per_iter", cpu / 1e3 / n,
        "caller_thread_cpu_us_per_iter", thread / 1e3 / n,
        "wall_s", wall / 1e9);
  }

  @Override
  public void close() {
    for (Server s : servers.values()) {
      s.stop();
    }
    jdk.disposeAll();
  }

  // ---- the served protocol ----

  /**
   * getContainerStatuses says who authenticated: every requested id comes back as a failed
   * request whose message is {@code user=<short name> auth=<method> ids=<n>}.
   */
  static final class WhoAmI implements ContainerManagementProtocol {
    private static YarnException notServed() {
      return new YarnException("not served by the hotpath sasl peer");
    }

    @Override
    public GetContainerStatusesResponse getContainerStatuses(GetContainerStatusesRequest request) {
      UserGroupInformation u = Server.getRemoteUser();
      List<ContainerId> ids = request.getContainerIds();
      String msg = "user=" + (u == null ? "null" : u.getShortUserName())
          + " auth=" + (u == null ? "null" : u.getAuthenticationMethod())
          + " ids=" + ids.size();
      Map<ContainerId, SerializedException> failed = new LinkedHashMap<>();
      for (ContainerId id : ids) {
        failed.put(id, SerializedException.newInstance(new YarnException(msg)));
      }
      return GetContainerStatusesResponse.newInstance(new ArrayList<>(), failed);
    }

    @Override
    public StartContainersResponse startContainers(StartContainersRequest r) throws YarnException {
      throw notServed();
    }

    @Override
    public StopContainersResponse stopContainers(StopContainersRequest r) throws YarnException {
      throw notServed();
    }

    @Override
    public IncreaseContainersResourceResponse increaseContainersResource(
        IncreaseContainersResourceRequest r) throws YarnException {
      throw notServed();
    }

    @Override
    public ContainerUpdateResponse updateContainer(ContainerUpdateRequest r) throws YarnException {
      throw notServed();
    }

    @Override
    public SignalContainerResponse signalToContainer(SignalContainerRequest r) throws YarnException {
      throw notServed();
    }

    @Override
    public ResourceLocalizationResponse localize(ResourceLocalizationRequest r)
        throws YarnException {
      throw notServed();
    }

    @Override
    public ReInitializeContainerResponse reInitializeContainer(ReInitializeContainerRequest r)
        throws YarnException {
      throw notServed();
    }

    @Override
    public RestartContainerResponse restartContainer(ContainerId c) throws YarnException {
      throw notServed();
    }

    @Override
    public RollbackResponse rollbackLastReInitialization(ContainerId c) throws YarnException {
      throw notServed();
    }

    @Override
    public CommitResponse commitLastReInitialization(ContainerId c) throws YarnException {
      throw notServed();
    }

    @Override
    public GetLocalizationStatusesResponse getLocalizationStatuses(
        GetLocalizationStatusesRequest r) throws YarnException {
      throw notServed();
    }
  }
}
