package hotpath.peer;

import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.ha.HAServiceProtocol;
import org.apache.hadoop.ha.HAServiceProtocol.HAServiceState;
import org.apache.hadoop.ha.HAServiceProtocol.StateChangeRequestInfo;
import org.apache.hadoop.util.Time;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.RMApp;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.RMAppState;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;
import org.apache.hadoop.yarn.api.records.NodeId;

/**
 * {@code yarn-rm-ha [--rms N] [--profile agents] [--set key=value]...}: N (2 or 3, default 2) real
 * ResourceManagers with HA on, in one MiniYARNCluster with no NodeManagers (production.md §2.1-2.4):
 * rm-ids {@code rm0..rm(N-1)}, every service address of every rm-id on a fixed free
 * {@code 127.0.0.1} port ({@code yarn.minicluster.fixed.ports}: a standby's resource-tracker port
 * is known before its first activation), automatic failover off (the shaded jars cannot run a
 * ZooKeeper client, §2.5), recovery on with a FileSystemRMStateStore in the work dir shared by
 * all RMs (applications and their attempts survive a failover; a MemoryRMStateStore is per RM).
 * rm0 starts active.
 *
 * <p>The clients' yarn-site.xml (the conf dir) carries {@code ha.enabled}, {@code ha.rm-ids} and
 * every {@code X.address.rmI}: an agent given that conf dir fails over by itself. The AMs' conf
 * (the whole cluster configuration) and the application client ({@link YarnClient}) are HA-aware
 * too, with {@code yarn.client.failover-sleep-base-ms} 100 / {@code -max-ms} 1000 (Java's default
 * 30 s sleeps would make an AM wait up to 45 s per hop).
 *
 * <p>Commands: {@code active} (the HA state of each RM), {@code failover FROM TO} (manual
 * failover through each RM's AdminService: FROM to standby, then TO to active, as {@code yarn
 * rmadmin -transitionToStandby/-transitionToActive} do; with timings), {@code transition I
 * active|standby}, {@code stop I} (the RM stops: the "active dies" case; its ports close),
 * {@code start I} (a stopped RM comes back, as standby), {@code nodes} (the active RM's nodes, as
 * {@code yarn-rm}'s), {@code app-submit}, {@code app-wait APP_ID [TIMEOUT_S]}, {@code app-kill}.
 * Times in replies are epoch milliseconds ({@code *_epoch_ms}) so that a test can line them up with
 * its own clock.
 */
final class YarnRmHaMode implements Mode {
  private static final String[] SERVICE_KEYS = {
    YarnConfiguration.RM_ADDRESS,
    YarnConfiguration.RM_SCHEDULER_ADDRESS,
    YarnConfiguration.RM_ADMIN_ADDRESS,
    YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS,
    YarnConfiguration.RM_WEBAPP_ADDRESS,
  };

  private final Args args;
  private final Path workDir;
  private final YarnConfiguration conf;
  private final int n;
  private final String[] ids;
  /** ports[i][k]: rm i, SERVICE_KEYS[k]. */
  private final int[][] ports;
  private final Map<String, String> profileKeys = new LinkedHashMap<>();
  private MiniYARNCluster cluster;
  private YarnClient client;
  private Path amConfDir;

  YarnRmHaMode(Args args, Path workDir) throws Exception {
    this.args = args;
    this.workDir = workDir;
    this.n = args.getInt("rms", 2);
    if (n < 2 || n > 3) {
      throw new IllegalArgumentException("--rms must be 2 or 3");
    }
    this.conf = YarnConf.base(args, workDir);
    String profile = args.get("profile", "none");
    switch (profile) {
      case "none" -> {}
      case "agents" -> profileKeys.putAll(YarnRmMode.AGENTS_PROFILE);
      default -> throw new IllegalArgumentException("unknown --profile " + profile);
    }
    Set<String> explicit = new HashSet<>();
    for (String[] kv : args.sets) {
      explicit.add(kv[0]);
    }
    for (Map.Entry<String, String> e : profileKeys.entrySet()) {
      if (!explicit.contains(e.getKey())) {
        conf.set(e.getKey(), e.getValue());
      }
    }
    ids = new String[n];
    ports = new int[n][SERVICE_KEYS.length];
    List<ServerSocket> held = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        ids[i] = "rm" + i;
        for (int k = 0; k < SERVICE_KEYS.length; k++) {
          // held open until all are chosen, so no two keys get the same port
          ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"));
          held.add(s);
          ports[i][k] = s.getLocalPort();
        }
      }
    } finally {
      for (ServerSocket s : held) {
        s.close();
      }
    }
    conf.setBoolean(YarnConfiguration.RM_HA_ENABLED, true);
    conf.set(YarnConfiguration.RM_HA_IDS, String.join(",", ids));
    conf.setBoolean(YarnConfiguration.AUTO_FAILOVER_ENABLED, false);
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, true);
    conf.setBoolean(YarnConfiguration.RECOVERY_ENABLED, true);
    conf.set(YarnConfiguration.RM_STORE,
        "org.apache.hadoop.yarn.server.resourcemanager.recovery.FileSystemRMStateStore");
    conf.set(YarnConfiguration.FS_RM_STATE_STORE_URI,
        workDir.resolve("rmstore").toUri().toString());
    conf.set(YarnConfiguration.RM_CLUSTER_ID, "hotpath-ha");
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < SERVICE_KEYS.length; k++) {
        conf.set(SERVICE_KEYS[k] + "." + ids[i], "127.0.0.1:" + ports[i][k]);
      }
      conf.set(YarnConfiguration.RM_HOSTNAME + "." + ids[i], "127.0.0.1");
    }
    // the AMs and the application client fail over fast (the agents read the conf dir, which
    // does not carry these)
    if (!explicit.contains("yarn.client.failover-sleep-base-ms")) {
      conf.setLong("yarn.client.failover-sleep-base-ms", 100);
    }
    if (!explicit.contains("yarn.client.failover-sleep-max-ms")) {
      conf.setLong("yarn.client.failover-sleep-max-ms", 1000);
    }
  }

  @Override
  public void start() throws Exception {
    cluster = new MiniYARNCluster("hotpath-peer-ha", n, 0, 1, 1);
    cluster.init(conf);
    cluster.start();
    if (activeIndex() != 0) {
      throw new IllegalStateException("rm0 is not active after start: " + states());
    }
    amConfDir = workDir.resolve("am-conf");
    Files.createDirectories(amConfDir);
    Path tmp = amConfDir.resolve("yarn-site.xml.tmp");
    try (OutputStream out = Files.newOutputStream(tmp)) {
      cluster.getConfig().writeXml(out);
    }
    Files.move(tmp, amConfDir.resolve("yarn-site.xml"), StandardCopyOption.REPLACE_EXISTING,
        StandardCopyOption.ATOMIC_MOVE);
    client = YarnClient.createYarnClient();
    client.init(new YarnConfiguration(cluster.getConfig()));
    client.start();
  }

  private ResourceManager rm(int i) {
    if (i < 0 || i >= n) {
      throw new IllegalArgumentException("no RM " + i + " (0.." + (n - 1) + ")");
    }
    return cluster.getResourceManager(i);
  }

  private HAServiceState state(int i) {
    ResourceManager r = rm(i);
    if (r == null || r.getServiceState() != org.apache.hadoop.service.Service.STATE.STARTED) {
      return HAServiceState.STOPPING;
    }
    return r.getRMContext().getHAServiceState();
  }

  /** The active RM's index, or -1. */
  private int activeIndex() {
    for (int i = 0; i < n; i++) {
      if (state(i) == HAServiceState.ACTIVE) {
        return i;
      }
    }
    return -1;
  }

  private List<String> states() {
    List<String> l = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      HAServiceState s = state(i);
      l.add(s == HAServiceState.STOPPING ? "STOPPED" : s.toString());
    }
    return l;
  }

  private Map<String, Object> rmInfo(int i) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("index", i);
    m.put("rm_id", ids[i]);
    m.put("rm_address", "127.0.0.1:" + ports[i][0]);
    m.put("scheduler_address", "127.0.0.1:" + ports[i][1]);
    m.put("admin_address", "127.0.0.1:" + ports[i][2]);
    m.put("resource_tracker", "127.0.0.1:" + ports[i][3]);
    m.put("webapp_address", "127.0.0.1:" + ports[i][4]);
    return m;
  }

  @Override
  public Map<String, Object> ready() {
    Map<String, Object> r = new LinkedHashMap<>();
    List<Object> rms = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      rms.add(rmInfo(i));
    }
    r.put("rms", rms);
    r.put("rm_ids", String.join(",", ids));
    r.put("active", activeIndex());
    r.put("states", states());
    r.put("cluster_timestamp", ResourceManager.getClusterTimeStamp());
    r.put("state_store", conf.get(YarnConfiguration.RM_STORE));
    r.put("nm_expiry_ms", conf.getLong(YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS,
        YarnConfiguration.DEFAULT_RM_NM_EXPIRY_INTERVAL_MS));
    r.put("profile", args.get("profile", "none"));
    r.put("am_conf_dir", amConfDir.toString());
    return r;
  }

  @Override
  public void writeConf(Path confDir) throws Exception {
    Map<String, String> y = new LinkedHashMap<>();
    y.put(YarnConfiguration.RM_HA_ENABLED, "true");
    y.put(YarnConfiguration.RM_HA_IDS, String.join(",", ids));
    y.put(YarnConfiguration.RM_CLUSTER_ID, conf.get(YarnConfiguration.RM_CLUSTER_ID));
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < SERVICE_KEYS.length; k++) {
        y.put(SERVICE_KEYS[k] + "." + ids[i], "127.0.0.1:" + ports[i][k]);
      }
      y.put(YarnConfiguration.RM_HOSTNAME + "." + ids[i], "127.0.0.1");
    }
    y.put(YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS, conf.get(
        YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS,
        String.valueOf(YarnConfiguration.DEFAULT_RM_NM_EXPIRY_INTERVAL_MS)));
    for (Map.Entry<String, String> e : profileKeys.entrySet()) {
      y.put(e.getKey(), conf.get(e.getKey()));
    }
    for (String[] kv : args.sets) {
      y.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("yarn-site.xml"), y);
    SiteXml.write(confDir.resolve("core-site.xml"), new LinkedHashMap<>());
  }

  private static StateChangeRequestInfo byUser() {
    return new StateChangeRequestInfo(HAServiceProtocol.RequestSource.REQUEST_BY_USER);
  }

  private Map<String, Object> transition(int i, String to) throws Exception {
    long t0 = System.nanoTime();
    switch (to) {
      case "active" -> rm(i).getRMContext().getRMAdminService().transitionToActive(byUser());
      case "standby" -> rm(i).getRMContext().getRMAdminService().transitionToStandby(byUser());
      default -> throw new IllegalArgumentException("transition I active|standby, got " + to);
    }
    return Json.obj("index", i, "to", to,
        "took_ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0),
        "done_epoch_ms", System.currentTimeMillis());
  }

  @Override
  public Map<String, Object> command(String name, String[] a) throws Exception {
    switch (name) {
      case "ping":
        return Json.obj();
      case "active":
        return Json.obj("active", activeIndex(), "states", states(),
            "cluster_timestamp", ResourceManager.getClusterTimeStamp());
      case "transition":
        need(a, 2, "transition I active|standby");
        return transition(Integer.parseInt(a[0]), a[1]);
      case "failover": {
        need(a, 2, "failover FROM TO");
        int from = Integer.parseInt(a[0]);
        int to = Integer.parseInt(a[1]);
        Map<String, Object> s = transition(from, "standby");
        Map<String, Object> t = transition(to, "active");
        return Json.obj("from", from, "to", to,
            "standby_ms", s.get("took_ms"), "standby_done_epoch_ms", s.get("done_epoch_ms"),
            "active_ms", t.get("took_ms"), "active_done_epoch_ms", t.get("done_epoch_ms"),
            "states", states(), "cluster_timestamp", ResourceManager.getClusterTimeStamp());
      }
      case "stop": {
        need(a, 1, "stop I");
        int i = Integer.parseInt(a[0]);
        long t0 = System.nanoTime();
        cluster.stopResourceManager(i);
        return Json.obj("index", i, "took_ms",
            TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0),
            "stopped_epoch_ms", System.currentTimeMillis(), "states", states());
      }
      case "start": {
        need(a, 1, "start I");
        int i = Integer.parseInt(a[0]);
        long t0 = System.nanoTime();
        cluster.restartResourceManager(i);
        return Json.obj("index", i, "took_ms",
            TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0), "states", states());
      }
      case "nodes":
        return nodes();
      case "app-submit":
        return ShellSubmit.submit(client, conf, workDir, amConfDir, a);
      case "app-wait": {
        need(a, 1, "app-wait APP_ID [TIMEOUT_S]");
        return appWait(ApplicationId.fromString(a[0]), a.length > 1 ? Long.parseLong(a[1]) : 120);
      }
      case "app-kill": {
        need(a, 1, "app-kill APP_ID");
        ApplicationId id = ApplicationId.fromString(a[0]);
        client.killApplication(id);
        return appWait(id, 30);
      }
      default:
        throw new IllegalArgumentException("unknown command " + name + " (yarn-rm-ha: ping, "
            + "active, transition I active|standby, failover FROM TO, stop I, start I, nodes, "
            + "app-submit KEY=VALUE..., app-wait APP_ID [TIMEOUT_S], app-kill APP_ID)");
    }
  }

  private static void need(String[] a, int k, String usage) {
    if (a.length < k) {
      throw new IllegalArgumentException(usage);
    }
  }

  /** The active RM's own view of its nodes (as {@code yarn-rm}'s {@code nodes}). */
  private Map<String, Object> nodes() throws Exception {
    int i = activeIndex();
    if (i < 0) {
      return Json.obj("active", -1, "nodes", new ArrayList<>(), "inactive", new ArrayList<>());
    }
    ResourceManager rm = rm(i);
    Map<NodeId, Long> pings = YarnRmMode.lastPings(rm);
    long now = Time.monotonicNow();
    List<Object> active = new ArrayList<>();
    List<RMNode> sorted = new ArrayList<>(rm.getRMContext().getRMNodes().values());
    sorted.sort(Comparator.comparing(x -> x.getNodeID().toString()));
    for (RMNode node : sorted) {
      Map<String, Object> m = YarnRmMode.describe(node);
      Long ping = pings.get(node.getNodeID());
      m.put("last_heartbeat_ms_ago", ping == null ? null : now - ping);
      active.add(m);
    }
    List<Object> inactive = new ArrayList<>();
    for (RMNode node : rm.getRMContext().getInactiveRMNodes().values()) {
      inactive.add(YarnRmMode.describe(node));
    }
    return Json.obj("active", i, "nodes", active, "inactive", inactive);
  }

  private Map<String, Object> appWait(ApplicationId id, long timeoutS) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
    ApplicationReport r;
    boolean timedOut;
    while (true) {
      r = client.getApplicationReport(id);
      YarnApplicationState s = r.getYarnApplicationState();
      if ((s == YarnApplicationState.FINISHED || s == YarnApplicationState.FAILED
          || s == YarnApplicationState.KILLED) && rmFinal(id)) {
        timedOut = false;
        break;
      }
      if (System.nanoTime() > deadline) {
        timedOut = true;
        break;
      }
      Thread.sleep(100);
    }
    int i = activeIndex();
    RMApp app = i < 0 ? null : rm(i).getRMContext().getRMApps().get(id);
    return Json.obj(
        "app_id", id.toString(),
        "timed_out", timedOut,
        "rm_app_state", app == null ? null : app.getState().toString(),
        "state", r.getYarnApplicationState().toString(),
        "final_status", r.getFinalApplicationStatus().toString(),
        "diagnostics", r.getDiagnostics(),
        "attempt_count", app == null ? null : app.getAppAttempts().size(),
        "current_attempt_id", r.getCurrentApplicationAttemptId() == null ? null
            : r.getCurrentApplicationAttemptId().toString());
  }

  private boolean rmFinal(ApplicationId id) {
    int i = activeIndex();
    if (i < 0) {
      return false;
    }
    RMApp app = rm(i).getRMContext().getRMApps().get(id);
    if (app == null) {
      return true;
    }
    RMAppState s = app.getState();
    return s == RMAppState.FINISHED || s == RMAppState.FAILED || s == RMAppState.KILLED;
  }

  @Override
  public void close() {
    if (client != null) {
      client.stop();
    }
    if (cluster != null) {
      cluster.stop();
    }
  }
}
