package hotpath.peer;

import java.io.File;
import java.io.RandomAccessFile;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSCluster.DataNodeProperties;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.DatanodeReportType;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlocks;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeDescriptor;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.namenode.NameNode;
import org.apache.hadoop.hdfs.server.namenode.NameNodeRpcServer;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.net.DNSToSwitchMapping;
import org.apache.hadoop.net.StaticMapping;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * {@code hdfs} and {@code hdfs-ha}: a MiniDFSCluster with N DataNodes in two racks; for
 * {@code hdfs-ha} three NameNodes over a journal quorum (active nn index 0, standby 1, observer 2).
 *
 * <p>Each DataNode has a stable index (the READY order) and, unless {@code --shared-ip true}, its
 * own loopback address 127.0.0.(2+index) as host name (trap 7 in hadoop-wire.md).
 *
 * <p>{@code --kerberos true}: a MiniKdc (realm EXAMPLE.COM, TCP) starts first; it holds
 * {@code hdfs/localhost} and {@code HTTP/localhost} (the service keytab) and {@code client} (the
 * client keytab). The cluster then runs Kerberized: {@code hadoop.security.authentication=kerberos},
 * service authorization on, NameNode and DataNodes as {@code hdfs/localhost@REALM}, block access
 * tokens, SASL data transfer protection instead of privileged DataNode ports (security.md 5.7:
 * {@code ignore.secure.ports.for.testing}), {@code hadoop.rpc.protection} and
 * {@code dfs.data.transfer.protection} default {@code authentication,integrity,privacy} (a server
 * accepts every entry of its list; each client picks its own first). The peer's own commands run
 * as {@code hdfs/localhost}. READY then carries {@code kerberos}: {@code realm}, {@code kdc},
 * {@code krb5_conf}, {@code client_principal}, {@code client_keytab},
 * {@code namenode_principal}, {@code service_keytab}, {@code rpc_protection}.
 * {@code --ticket-lifetime S} (with {@code --kerberos}): the KDC's tickets last S seconds.
 *
 * <p>{@code hdfs-ha --kerberos true}: the same for the three NameNodes (each
 * {@code hdfs/localhost@REALM}; no journal nodes: they share an edits directory). Commands
 * {@code failover TO} (the active to standby, NameNode TO to active) and
 * {@code transition I standby|observer} (any HA mode).
 */
final class HdfsMode implements Mode {
  private static final String NS = "hotpath-ns";

  /** One DataNode as the tests name it: its index survives stops and restarts. */
  private static final class Slot {
    final int index;
    final String host;
    final String rack;
    DataNode dn;
    DataNodeProperties stopped;
    // remembered while running: a stopped DataNode's ports cannot be asked for
    String uuid;
    int xferPort;
    int ipcPort;
    int httpPort;

    void attach(DataNode d) {
      dn = d;
      stopped = null;
      uuid = d.getDatanodeUuid();
      xferPort = d.getXferPort();
      ipcPort = d.getIpcPort();
      httpPort = d.getInfoPort();
    }

    Slot(int index, String host, String rack) {
      this.index = index;
      this.host = host;
      this.rack = rack;
    }
  }

  private final Args args;
  private final java.nio.file.Path workDir;
  private final boolean ha;
  private final int numDn;
  private final long blockSize;
  private final boolean distinctIps;
  private final short replication;
  private final HdfsConfiguration conf;
  private final List<Slot> slots = new ArrayList<>();
  private MiniDFSCluster cluster;
  private int active;
  private final boolean kerberos;
  private MiniKdc kdc;
  private final Map<String, Object> kerberosInfo = new LinkedHashMap<>();

  HdfsMode(Args args, java.nio.file.Path workDir, boolean ha) {
    this.args = args;
    this.workDir = workDir;
    this.ha = ha;
    this.numDn = args.getInt("datanodes", 3);
    this.blockSize = args.getLong("block-size", 1 << 20);
    this.distinctIps = !Boolean.parseBoolean(args.get("shared-ip", "false"));
    this.kerberos = Boolean.parseBoolean(args.get("kerberos", "false"));
    if (numDn < 1 || numDn > 200) {
      throw new IllegalArgumentException("--datanodes must be 1..200");
    }
    String[] racks = args.has("racks") ? args.get("racks", "").split(",") : null;
    if (racks != null && racks.length != numDn) {
      throw new IllegalArgumentException("--racks needs one rack per DataNode");
    }
    for (int i = 0; i < numDn; i++) {
      String rack = racks != null ? racks[i] : (i < (numDn + 1) / 2 ? "/r1" : "/r2");
      slots.add(new Slot(i, distinctIps ? "127.0.0." + (2 + i) : "127.0.0.1", rack));
    }

    conf = new HdfsConfiguration();
    conf.set("hadoop.tmp.dir", workDir.resolve("tmp").toString());
    conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, blockSize);
    conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, Math.min(3, numDn));
    conf.setBoolean("dfs.namenode.state.context.enabled", true);
    conf.setBoolean(DFSConfigKeys.DFS_CLIENT_USE_DN_HOSTNAME, distinctIps);
    conf.setBoolean(DFSConfigKeys.DFS_DATANODE_USE_DN_HOSTNAME, distinctIps);
    conf.setClass("net.topology.node.switch.mapping.impl", StaticMapping.class,
        DNSToSwitchMapping.class);
    conf.setInt("dfs.datanode.scan.period.hours", -1);
    if (ha) {
      // observer reads (same settings as Hadoop's own observer tests)
      conf.setBoolean("dfs.ha.tail-edits.in-progress", true);
      conf.set("dfs.ha.tail-edits.period", "100ms");
      conf.set("dfs.ha.log-roll.period", "300s");
    }
    for (String[] kv : args.sets) {
      conf.set(kv[0], kv[1]);
    }
    // MiniDFSCluster lowers dfs.replication in this conf to its initial DataNode count (0 here)
    replication = (short) conf.getInt(DFSConfigKeys.DFS_REPLICATION_KEY, 3);
  }

  /** The KDC, principals, keytabs and the security keys of the cluster's configuration. */
  private void startKdc() throws Exception {
    File kdcDir = workDir.resolve("kdc").toFile();
    if (!kdcDir.mkdirs() && !kdcDir.isDirectory()) {
      throw new IllegalStateException("cannot create " + kdcDir);
    }
    java.util.Properties kdcConf = MiniKdc.createConf();
    // --ticket-lifetime S: tickets (renewable ones too) last S seconds, so that clients' logins
    // expire during a test; Java's own clients may then log in again from their keytabs at once.
    if (args.has("ticket-lifetime")) {
      long lifetime = args.getLong("ticket-lifetime", 0);
      if (lifetime < 5) {
        throw new IllegalArgumentException("--ticket-lifetime must be at least 5 (seconds)");
      }
      kdcConf.setProperty(MiniKdc.MAX_TICKET_LIFETIME, Long.toString(lifetime));
      kdcConf.setProperty(MiniKdc.MAX_RENEWABLE_LIFETIME, Long.toString(lifetime));
      conf.setLong("hadoop.kerberos.min.seconds.before.relogin", 1);
    }
    kdc = new MiniKdc(kdcConf, kdcDir);
    kdc.start();
    String realm = kdc.getRealm();
    File serviceKeytab = new File(kdcDir, "hdfs.keytab");
    kdc.createPrincipal(serviceKeytab, "hdfs/localhost", "HTTP/localhost");
    File clientKeytab = new File(kdcDir, "client.keytab");
    kdc.createPrincipal(clientKeytab, "client");
    String hdfs = "hdfs/localhost@" + realm;
    String http = "HTTP/localhost@" + realm;
    String all = "authentication,integrity,privacy";
    // core-default.xml gives hadoop.rpc.protection a value: only a --set overrides ours
    for (String k : new String[] {"hadoop.rpc.protection",
        DFSConfigKeys.DFS_DATA_TRANSFER_PROTECTION_KEY}) {
      if (args.sets.stream().noneMatch(kv -> kv[0].equals(k))) {
        conf.set(k, all);
      }
    }
    conf.set("hadoop.security.authentication", "kerberos");
    conf.setBoolean("hadoop.security.authorization", true);
    conf.set(DFSConfigKeys.DFS_NAMENODE_KERBEROS_PRINCIPAL_KEY, hdfs);
    conf.set(DFSConfigKeys.DFS_NAMENODE_KEYTAB_FILE_KEY, serviceKeytab.getAbsolutePath());
    conf.set(DFSConfigKeys.DFS_DATANODE_KERBEROS_PRINCIPAL_KEY, hdfs);
    conf.set(DFSConfigKeys.DFS_DATANODE_KEYTAB_FILE_KEY, serviceKeytab.getAbsolutePath());
    conf.set(DFSConfigKeys.DFS_WEB_AUTHENTICATION_KERBEROS_PRINCIPAL_KEY, http);
    conf.set(DFSConfigKeys.DFS_WEB_AUTHENTICATION_KERBEROS_KEYTAB_KEY,
        serviceKeytab.getAbsolutePath());
    conf.setBoolean(DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_KEY, true);
    conf.setBoolean(DFSConfigKeys.IGNORE_SECURE_PORTS_FOR_TESTING_KEY, true);
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(hdfs, serviceKeytab.getAbsolutePath());
    kerberosInfo.put("realm", realm);
    kerberosInfo.put("kdc", kdc.getHost() + ":" + kdc.getPort());
    kerberosInfo.put("krb5_conf", kdc.getKrb5conf().getAbsolutePath());
    kerberosInfo.put("client_principal", "client@" + realm);
    kerberosInfo.put("client_keytab", clientKeytab.getAbsolutePath());
    kerberosInfo.put("namenode_principal", hdfs);
    kerberosInfo.put("service_keytab", serviceKeytab.getAbsolutePath());
    kerberosInfo.put("rpc_protection", conf.get("hadoop.rpc.protection"));
  }

  @Override
  public void start() throws Exception {
    if (kerberos) {
      startKdc();
    }
    File base = workDir.resolve("dfs").toFile();
    // Distinct IPs: the NameNodes start first, then one DataNode at a time with its own
    // configuration. The builder's per-DN overlays cannot carry the host name (MiniDFSCluster sets
    // it on the shared conf, and set() values win over overlays), and its hosts[] argument maps
    // every host to "localhost" (NetUtils static resolution), which would bind 127.0.0.1.
    int builderDns = distinctIps ? 0 : numDn;
    String[] racks = new String[numDn];
    for (Slot s : slots) {
      racks[s.index] = s.rack;
    }
    MiniDFSCluster.Builder b = new MiniDFSCluster.Builder(conf, base);
    configure(b, builderDns, racks);
    if (ha) {
      // A shared edits directory, not a journal quorum: MiniJournalCluster needs test classes
      // the shaded minicluster jar leaves out (TestEditLog$GarbageMkdirOp).
      b.nnTopology(MiniDFSNNTopology.simpleHATopology(3));
    }
    cluster = b.build();
    if (ha) {
      cluster.transitionToActive(0);
      cluster.waitActive(0);
      cluster.transitionToObserver(2);
    }
    active = 0;
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, replication);
    if (distinctIps) {
      for (Slot s : slots) {
        StaticMapping.addNodeToRack(s.host, s.rack);
        HdfsConfiguration dnConf = new HdfsConfiguration(conf);
        dnConf.set(DFSConfigKeys.DFS_DATANODE_ADDRESS_KEY, s.host + ":0");
        dnConf.set(DFSConfigKeys.DFS_DATANODE_IPC_ADDRESS_KEY, s.host + ":0");
        dnConf.set(DFSConfigKeys.DFS_DATANODE_HTTP_ADDRESS_KEY, s.host + ":0");
        dnConf.set(DFSConfigKeys.DFS_DATANODE_HOST_NAME_KEY, s.host);
        cluster.startDataNodes(dnConf, 1, null, true, null, null, null, null, null, false, true,
            true, null, null, null);
      }
    }
    cluster.waitActive();
    List<DataNode> dns = cluster.getDataNodes();
    for (Slot s : slots) {
      s.attach(dns.get(s.index));
      if (distinctIps && !s.dn.getXferAddress().getAddress().getHostAddress().equals(s.host)) {
        throw new IllegalStateException("DataNode " + s.index + " bound "
            + s.dn.getXferAddress() + ", not " + s.host);
      }
    }
  }

  private void configure(MiniDFSCluster.Builder b, int dns, String[] racks) {
    b.numDataNodes(dns).useConfiguredTopologyMappingClass(true);
    if (dns > 0) {
      b.racks(racks);
    }
  }

  private NameNode activeNn() {
    return cluster.getNameNode(active);
  }

  private DistributedFileSystem fs() throws Exception {
    return cluster.getFileSystem(active);
  }

  private static String addr(java.net.InetSocketAddress a) {
    return YarnRmMode.hostPort(a);
  }

  @Override
  public Map<String, Object> ready() throws Exception {
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("namenode", addr(activeNn().getNameNodeAddress()));
    r.put("namenode_http", addr(activeNn().getHttpAddress()));
    r.put("fs_default_fs", defaultFs());
    r.put("block_size", blockSize);
    r.put("replication", (int) replication);
    r.put("distinct_ips", distinctIps);
    r.put("datanodes", datanodes());
    if (kerberos) {
      r.put("kerberos", kerberosInfo);
    }
    if (ha) {
      r.put("nameservice", NS);
      r.put("namenodes", namenodes());
      for (Map<String, Object> nn : namenodes()) {
        r.putIfAbsent((String) nn.get("state"), nn.get("rpc"));
      }
    }
    return r;
  }

  private String defaultFs() {
    return ha ? "hdfs://" + NS : "hdfs://" + addr(activeNn().getNameNodeAddress());
  }

  private List<Map<String, Object>> namenodes() {
    List<Map<String, Object>> l = new ArrayList<>();
    for (int i = 0; i < cluster.getNumNameNodes(); i++) {
      NameNode nn = cluster.getNameNode(i);
      org.apache.hadoop.ipc.Server rpc =
          ((NameNodeRpcServer) nn.getRpcServer()).getClientRpcServer();
      l.add(Json.obj("index", i, "nn_id", "nn" + i,
          "rpc", addr(nn.getNameNodeAddress()),
          "http", addr(nn.getHttpAddress()),
          "state", nn.getState().toLowerCase(),
          // all calls on the client port (DataNode heartbeats included): a test can diff it
          "rpc_requests", rpc.getRpcMetrics().getTotalRequests(),
          "open_connections", rpc.getNumOpenConnections()));
    }
    return l;
  }

  /** Every DataNode slot, joined with the active NameNode's view of it. */
  private List<Object> datanodes() {
    Map<String, DatanodeDescriptor> nnView = new LinkedHashMap<>();
    for (DatanodeDescriptor d : activeNn().getNamesystem().getBlockManager().getDatanodeManager()
        .getDatanodeListForReport(DatanodeReportType.ALL)) {
      nnView.put(d.getDatanodeUuid(), d);
    }
    List<Object> l = new ArrayList<>();
    for (Slot s : slots) {
      Map<String, Object> m = Json.obj(
          "index", s.index,
          "host", s.host,
          "rack", s.rack,
          "running", s.dn != null,
          "uuid", s.uuid,
          "xfer", s.host + ":" + s.xferPort,
          "ipc", s.host + ":" + s.ipcPort,
          "http", s.host + ":" + s.httpPort);
      DatanodeDescriptor d = nnView.get(s.uuid);
      if (d != null) {
        m.put("nn_ip_addr", d.getIpAddr());
        m.put("nn_host_name", d.getHostName());
        m.put("nn_network_location", d.getNetworkLocation());
        m.put("nn_alive", d.isAlive());
      }
      l.add(m);
    }
    return l;
  }

  @Override
  public void writeConf(java.nio.file.Path confDir) throws Exception {
    Map<String, String> core = new LinkedHashMap<>();
    core.put("fs.defaultFS", defaultFs());
    if (kerberos) {
      core.put("hadoop.security.authentication", "kerberos");
      core.put("hadoop.rpc.protection", conf.get("hadoop.rpc.protection"));
    }
    SiteXml.write(confDir.resolve("core-site.xml"), core);
    Map<String, String> h = new LinkedHashMap<>();
    h.put(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, String.valueOf(blockSize));
    h.put(DFSConfigKeys.DFS_REPLICATION_KEY, String.valueOf(replication));
    h.put(DFSConfigKeys.DFS_CLIENT_USE_DN_HOSTNAME, String.valueOf(distinctIps));
    h.put("dfs.namenode.state.context.enabled", "true");
    if (kerberos) {
      for (String k : new String[] {DFSConfigKeys.DFS_NAMENODE_KERBEROS_PRINCIPAL_KEY,
          DFSConfigKeys.DFS_DATA_TRANSFER_PROTECTION_KEY,
          DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_KEY}) {
        h.put(k, conf.get(k));
      }
    }
    if (ha) {
      h.put("dfs.nameservices", NS);
      h.put("dfs.ha.namenodes." + NS, "nn0,nn1,nn2");
      for (int i = 0; i < 3; i++) {
        NameNode nn = cluster.getNameNode(i);
        h.put("dfs.namenode.rpc-address." + NS + ".nn" + i, addr(nn.getNameNodeAddress()));
        h.put("dfs.namenode.http-address." + NS + ".nn" + i, addr(nn.getHttpAddress()));
      }
      h.put("dfs.client.failover.proxy.provider." + NS,
          "org.apache.hadoop.hdfs.server.namenode.ha.ObserverReadProxyProvider");
      h.put("dfs.ha.automatic-failover.enabled", "false");
    }
    for (String[] kv : args.sets) {
      h.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("hdfs-site.xml"), h);
  }

  @Override
  public Map<String, Object> command(String name, String[] a) throws Exception {
    switch (name) {
      case "write":
        need(a, 2, "write PATH BYTES [BLOCKSIZE] [REPLICATION]");
        return write(a[0], Long.parseLong(a[1]),
            a.length > 2 ? Long.parseLong(a[2]) : blockSize,
            a.length > 3 ? Short.parseShort(a[3]) : replication);
      case "mkfiles":
        need(a, 2, "mkfiles DIR K");
        return mkfiles(a[0], Integer.parseInt(a[1]));
      case "delete":
        need(a, 1, "delete PATH");
        return Json.obj("deleted", fs().delete(new Path(a[0]), true));
      case "block-locations":
        need(a, 1, "block-locations PATH");
        return Json.obj("path", a[0], "blocks", blockLocations(a[0]));
      case "datanodes":
        return Json.obj("datanodes", datanodes());
      case "dn-stop":
        need(a, 1, "dn-stop I");
        stopDn(slot(a[0]));
        return Json.obj("datanodes", datanodes());
      case "dn-dead": {
        need(a, 1, "dn-dead I");
        Slot s = slot(a[0]);
        stopDn(s);
        cluster.setDataNodeDead(s.stopped.getDatanode().getDatanodeId());
        return Json.obj("datanodes", datanodes());
      }
      case "dn-restart":
        need(a, 1, "dn-restart I");
        restartDn(slot(a[0]));
        return Json.obj("datanodes", datanodes());
      case "corrupt":
        need(a, 3, "corrupt PATH BLOCKINDEX REPLICAINDEX");
        return corrupt(a[0], Integer.parseInt(a[1]), Integer.parseInt(a[2]));
      case "namenodes":
        return Json.obj("namenodes", namenodes());
      case "ping":
        return Json.obj();
      case "fetchdt":
        need(a, 1, "fetchdt FILE [RENEWER]");
        return HdfsTokens.fetchdt(fs(), conf, a[0], a.length > 1 ? a[1] : null);
      case "token-stat":
        need(a, 2, "token-stat FILE PATH");
        return HdfsTokens.tokenStat(fs().getUri(), conf, a[0], a[1]);
      case "failover":
        need(a, 1, "failover TO (hdfs-ha: the active becomes standby, nn TO active)");
        return failover(Integer.parseInt(a[0]));
      case "transition":
        need(a, 2, "transition I standby|observer (hdfs-ha: NameNode I, not the active)");
        return transition(Integer.parseInt(a[0]), a[1]);
      default:
        throw new IllegalArgumentException("unknown command " + name + " (" + (ha ? "hdfs-ha" : "hdfs")
            + ": write, mkfiles, delete, block-locations, datanodes, dn-stop, dn-dead,"
            + " dn-restart, corrupt, namenodes, ping)");
    }
  }

  /**
   * {@code failover TO}: a manual failover as {@code hdfs haadmin -failover} makes it, the
   * active NameNode to standby first, then NameNode {@code TO} (a standby) to active.
   */
  private Map<String, Object> failover(int to) throws Exception {
    if (!ha) {
      throw new IllegalArgumentException("failover is for hdfs-ha");
    }
    if (to < 0 || to >= cluster.getNumNameNodes()
        || !cluster.getNameNode(to).getState().equalsIgnoreCase("standby")) {
      throw new IllegalArgumentException("failover: no standby NameNode " + to);
    }
    int from = active;
    cluster.transitionToStandby(from);
    cluster.transitionToActive(to);
    cluster.waitActive(to);
    active = to;
    return Json.obj("from", from, "to", to, "namenodes", namenodes());
  }

  /** {@code transition I STATE}: a NameNode other than the active to standby or observer. */
  private Map<String, Object> transition(int i, String state) throws Exception {
    if (!ha || i < 0 || i >= cluster.getNumNameNodes() || i == active) {
      throw new IllegalArgumentException("transition: no non-active NameNode " + i);
    }
    switch (state) {
      case "standby":
        cluster.transitionToStandby(i);
        break;
      case "observer":
        cluster.transitionToObserver(i);
        break;
      default:
        throw new IllegalArgumentException("transition: standby or observer, not " + state);
    }
    return Json.obj("namenodes", namenodes());
  }

  private static void need(String[] a, int n, String usage) {
    if (a.length < n) {
      throw new IllegalArgumentException("usage: " + usage);
    }
  }

  private Slot slot(String s) {
    int i = Integer.parseInt(s);
    if (i < 0 || i >= slots.size()) {
      throw new IllegalArgumentException("no DataNode " + i + " (0.." + (slots.size() - 1) + ")");
    }
    return slots.get(i);
  }

  private Map<String, Object> write(String path, long bytes, long bs, short repl)
      throws Exception {
    MessageDigest sha = MessageDigest.getInstance("SHA-256");
    byte[] buf = new byte[1 << 16];
    long t0 = System.nanoTime();
    try (FSDataOutputStream out = fs().create(new Path(path), true, 1 << 16, repl, bs)) {
      long off = 0;
      while (off < bytes) {
        int n = (int) Math.min(buf.length, bytes - off);
        Content.fill(buf, n, off);
        sha.update(buf, 0, n);
        out.write(buf, 0, n);
        off += n;
      }
    }
    double secs = (System.nanoTime() - t0) / 1e9;
    return Json.obj("path", path, "bytes", bytes, "block_size", bs, "replication", (int) repl,
        "blocks", (bytes + bs - 1) / bs, "sha256", HexFormat.of().formatHex(sha.digest()),
        "seconds", secs);
  }

  private Map<String, Object> mkfiles(String dir, int k) throws Exception {
    FileSystem fs = fs();
    Path d = new Path(dir);
    fs.mkdirs(d);
    long t0 = System.nanoTime();
    int threads = Math.min(8, Math.max(1, k));
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    AtomicLong next = new AtomicLong();
    try {
      List<Future<?>> fs2 = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        fs2.add(pool.submit(() -> {
          long i;
          while ((i = next.getAndIncrement()) < k) {
            fs.create(new Path(d, "f" + i), true, 4096, replication, blockSize).close();
          }
          return null;
        }));
      }
      for (Future<?> f : fs2) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
    }
    return Json.obj("dir", dir, "files", k, "names", dir + "/f0 .. " + dir + "/f" + (k - 1),
        "seconds", (System.nanoTime() - t0) / 1e9);
  }

  private List<Object> blockLocations(String path) throws Exception {
    LocatedBlocks lbs = fs().getClient().getLocatedBlocks(path, 0, Long.MAX_VALUE);
    List<Object> l = new ArrayList<>();
    int i = 0;
    for (LocatedBlock lb : lbs.getLocatedBlocks()) {
      List<Object> locs = new ArrayList<>();
      for (DatanodeInfo d : lb.getLocations()) {
        Slot s = slotOf(d);
        locs.add(Json.obj("dn_index", s == null ? null : s.index,
            "xfer", d.getHostName() + ":" + d.getXferPort(),
            "ip_addr", d.getIpAddr(), "host_name", d.getHostName(),
            "rack", d.getNetworkLocation(), "uuid", d.getDatanodeUuid()));
      }
      ExtendedBlock b = lb.getBlock();
      l.add(Json.obj("index", i++, "offset", lb.getStartOffset(), "length", b.getNumBytes(),
          "block_id", b.getBlockId(), "generation_stamp", b.getGenerationStamp(),
          "pool_id", b.getBlockPoolId(), "corrupt", lb.isCorrupt(), "locations", locs));
    }
    return l;
  }

  private Slot slotOf(DatanodeInfo d) {
    for (Slot s : slots) {
      if (s.uuid.equals(d.getDatanodeUuid())) {
        return s;
      }
    }
    return null;
  }

  private void stopDn(Slot s) {
    if (s.dn == null) {
      return;
    }
    int pos = cluster.getDataNodes().indexOf(s.dn);
    s.stopped = cluster.stopDataNode(pos);
    s.dn = null;
  }

  private void restartDn(Slot s) throws Exception {
    stopDn(s);
    DataNodeProperties props = s.stopped;
    if (!cluster.restartDataNode(props, true)) {
      throw new IllegalStateException("DataNode " + s.index + " did not restart");
    }
    List<DataNode> dns = cluster.getDataNodes();
    DataNode dn = dns.get(dns.size() - 1);
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (!dn.isDatanodeFullyStarted()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("DataNode " + s.index + " not registered after 60 s");
      }
      Thread.sleep(50);
    }
    s.attach(dn);
    cluster.triggerHeartbeats();
  }

  /** Flips bytes of one replica's block file on disk; its checksums no longer match. */
  private Map<String, Object> corrupt(String path, int blockIndex, int replicaIndex)
      throws Exception {
    LocatedBlocks lbs = fs().getClient().getLocatedBlocks(path, 0, Long.MAX_VALUE);
    if (blockIndex < 0 || blockIndex >= lbs.locatedBlockCount()) {
      throw new IllegalArgumentException(path + " has " + lbs.locatedBlockCount() + " blocks");
    }
    LocatedBlock lb = lbs.get(blockIndex);
    DatanodeInfo[] locs = lb.getLocations();
    if (replicaIndex < 0 || replicaIndex >= locs.length) {
      throw new IllegalArgumentException("block " + blockIndex + " has " + locs.length
          + " replicas");
    }
    Slot s = slotOf(locs[replicaIndex]);
    if (s == null || s.dn == null) {
      throw new IllegalStateException("replica " + replicaIndex + " is on a stopped DataNode");
    }
    File f = cluster.getBlockFile(cluster.getDataNodes().indexOf(s.dn), lb.getBlock());
    if (f == null) {
      throw new IllegalStateException("no block file for " + lb.getBlock());
    }
    long len = f.length();
    try (RandomAccessFile raf = new RandomAccessFile(f, "rw")) {
      for (long off : new long[] {0, len / 2, Math.max(0, len - 1)}) {
        if (off < len) {
          raf.seek(off);
          int v = raf.read();
          raf.seek(off);
          raf.write(v ^ 0xFF);
        }
      }
    }
    return Json.obj("path", path, "block_index", blockIndex, "replica_index", replicaIndex,
        "dn_index", s.index, "xfer", s.host + ":" + s.xferPort,
        "block_id", lb.getBlock().getBlockId(), "file", f.toString());
  }

  @Override
  public void close() throws Exception {
    try {
      if (cluster != null) {
        cluster.shutdown(true);
      }
    } finally {
      if (kdc != null) {
        kdc.stop();
      }
    }
  }
}
