package hotpath.peer;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.security.PrivilegedExceptionAction;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.ApplicationSubmissionContext;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.client.api.YarnClientApplication;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.RMApp;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.RMAppState;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.attempt.RMAppAttemptState;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.attempt.RMAppAttempt;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.attempt.RMAppAttemptImpl;
import org.apache.hadoop.util.Time;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.api.protocolrecords.NodeHeartbeatResponse;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNodeImpl;
import org.apache.hadoop.yarn.util.AbstractLivelinessMonitor;

/**
 * {@code yarn-rm [--nms K] [--profile agents] [--set key=value]...}: a real ResourceManager
 * (MiniYARNCluster) with K in-JVM NodeManagers (default 0), whose resource-tracker port any
 * NodeManager can register with.
 *
 * <p>{@code --profile agents} sets the defaults for running applications on external NodeManagers
 * (hotpath agents), see {@link #AGENTS_PROFILE}; {@code --set} still overrides each of them.
 * The application commands ({@code app-submit}, {@code app-wait}, {@code app-kill}) are the client
 * half of the {@link ShellAm} application: they submit it through {@link YarnClient}, with the
 * cluster's own configuration (bound addresses included) written out as the AM's yarn-site.xml.
 *
 * <p>{@code --kerberos true}: a MiniKdc (realm EXAMPLE.COM, TCP) starts first, holding
 * {@code rm/localhost} + {@code HTTP/localhost} (rm.keytab), {@code nm/localhost} and
 * {@code nm/<this host's canonical name>} (nm.keytab, for the NodeManagers that join) and
 * {@code client} (client.keytab). The RM runs Kerberized: {@code hadoop.security.authentication=
 * kerberos}, {@code yarn.resourcemanager.principal=rm/localhost@REALM} with its keytab (the
 * process logs in as it, since the mini cluster's RM skips its own login; SPNEGO for its web app
 * from the same keytab), {@code hadoop.rpc.protection} {@code authentication} (each overridable
 * by {@code --set}). The application commands' YarnClient
 * logs in as {@code client} from its keytab. READY carries {@code kerberos}: {@code realm},
 * {@code kdc}, {@code krb5_conf}, {@code client_principal}, {@code client_keytab},
 * {@code rm_principal}, {@code rm_keytab}, {@code nm_principal}, {@code nm_host_principal},
 * {@code nm_keytab}, {@code rpc_protection}.
 * {@code --ticket-lifetime S} (with {@code --kerberos}): the KDC's tickets last S seconds.
 */
final class YarnRmMode implements Mode {
  private final Args args;
  private final YarnConfiguration conf;
  private final int nms;
  private MiniYARNCluster cluster;
  private final boolean kerberos;
  private MiniKdc kdc;
  private final Map<String, Object> kerberosInfo = new LinkedHashMap<>();
  /** {@code --kerberos true}: the application client's login ({@code client} from its keytab). */
  private UserGroupInformation clientUgi;

  /**
   * {@code --profile agents}: FIFO scheduling (no queue configuration to get wrong), a 128 MB
   * minimum allocation (a 4 GB node hosts an AM and many shell containers), two AM attempts, a
   * 10 s NodeManager expiry (a killed node's containers are declared lost within ~10-20 s), a fast
   * give-up when a NodeManager's CMP port does not answer (RM AMLauncher and AMs), a 30 s AM
   * liveness expiry (an AM container whose completion is never reported surfaces in 30 s, not 15
   * min), and 4 GB / 8 vcores for in-JVM NodeManagers.
   */
  static final Map<String, String> AGENTS_PROFILE = profile(
      YarnConfiguration.RM_SCHEDULER,
      "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler",
      YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, "128",
      YarnConfiguration.RM_AM_MAX_ATTEMPTS, "2",
      YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS, "10000",
      YarnConfiguration.CLIENT_NM_CONNECT_MAX_WAIT_MS, "5000",
      YarnConfiguration.CLIENT_NM_CONNECT_RETRY_INTERVAL_MS, "1000",
      YarnConfiguration.RM_AM_EXPIRY_INTERVAL_MS, "30000",
      YarnConfiguration.NM_PMEM_MB, "4096",
      YarnConfiguration.YARN_MINICLUSTER_NM_PMEM_MB, "4096",
      YarnConfiguration.NM_VCORES, "8");

  static Map<String, String> profile(String... kv) {
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i + 1 < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return m;
  }

  private final Path workDir;
  /** Keys set by the profile (written to the clients' yarn-site.xml too). */
  private final Map<String, String> profileKeys = new LinkedHashMap<>();
  private YarnClient client;
  /** The AMs' conf dir: the running cluster's whole configuration as yarn-site.xml. */
  private Path amConfDir;
  private String amConfSchedulerAddress;
  private boolean amConfHasBoundPorts;

  YarnRmMode(Args args, Path workDir) {
    this.args = args;
    this.workDir = workDir;
    this.conf = YarnConf.base(args, workDir);
    this.nms = args.getInt("nms", 0);
    this.kerberos = Boolean.parseBoolean(args.get("kerberos", "false"));
    String profile = args.get("profile", "none");
    switch (profile) {
      case "none" -> {}
      case "agents" -> profileKeys.putAll(AGENTS_PROFILE);
      default -> throw new IllegalArgumentException("unknown --profile " + profile
          + " (agents, none)");
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
  }

  @Override
  public void start() throws Exception {
    if (kerberos) {
      startKdc();
    }
    cluster = new MiniYARNCluster("hotpath-peer", 1, nms, 1, 1);
    cluster.init(conf);
    cluster.start();
    if (nms > 0 && !cluster.waitForNodeManagersToConnect(120_000)) {
      throw new IllegalStateException(nms + " NodeManagers did not register in 120 s");
    }
    writeAmConf();
    YarnConfiguration clientConf = new YarnConfiguration(cluster.getConfig());
    PrivilegedExceptionAction<YarnClient> newClient = () -> {
      YarnClient c = YarnClient.createYarnClient();
      c.init(clientConf);
      c.start();
      return c;
    };
    // the RM proxy keeps the UGI current at its creation: the client's login
    client = clientUgi != null ? clientUgi.doAs(newClient) : newClient.run();
  }

  private boolean given(String key) {
    return args.sets.stream().anyMatch(kv -> kv[0].equals(key));
  }

  private void setIfAbsent(String key, String value) {
    if (!given(key)) {
      conf.set(key, value);
    }
  }

  /** The KDC, the principals and keytabs, and the RM's security keys. */
  private void startKdc() throws Exception {
    File kdcDir = workDir.resolve("kdc").toFile();
    if (!kdcDir.mkdirs() && !kdcDir.isDirectory()) {
      throw new IllegalStateException("cannot create " + kdcDir);
    }
    java.util.Properties kdcConf = MiniKdc.createConf();
    // --ticket-lifetime S: tickets (renewable ones too) last S seconds, so that the logins of
    // the NodeManagers that join expire during a test (as in HdfsMode)
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
    File rmKeytab = new File(kdcDir, "rm.keytab");
    kdc.createPrincipal(rmKeytab, "rm/localhost", "HTTP/localhost");
    // what _HOST in yarn.nodemanager.principal stands for on this machine (Java's
    // SecurityUtil.login: the local host's canonical name)
    String host = java.net.InetAddress.getLocalHost().getCanonicalHostName().toLowerCase();
    File nmKeytab = new File(kdcDir, "nm.keytab");
    if (host.equals("localhost")) {
      kdc.createPrincipal(nmKeytab, "nm/localhost");
    } else {
      kdc.createPrincipal(nmKeytab, "nm/localhost", "nm/" + host);
    }
    File clientKeytab = new File(kdcDir, "client.keytab");
    kdc.createPrincipal(clientKeytab, "client");
    // core-default.xml gives hadoop.rpc.protection a value: only a --set overrides ours
    setIfAbsent("hadoop.rpc.protection", "authentication");
    conf.set("hadoop.security.authentication", "kerberos");
    setIfAbsent(YarnConfiguration.RM_PRINCIPAL, "rm/localhost@" + realm);
    setIfAbsent(YarnConfiguration.RM_KEYTAB, rmKeytab.getAbsolutePath());
    setIfAbsent(YarnConfiguration.RM_WEBAPP_SPNEGO_USER_NAME_KEY, "HTTP/localhost@" + realm);
    setIfAbsent(YarnConfiguration.RM_WEBAPP_SPNEGO_KEYTAB_FILE_KEY, rmKeytab.getAbsolutePath());
    // in-JVM NodeManagers (--nms K) log in as nm/localhost
    setIfAbsent(YarnConfiguration.NM_PRINCIPAL, "nm/localhost@" + realm);
    setIfAbsent(YarnConfiguration.NM_KEYTAB, nmKeytab.getAbsolutePath());
    UserGroupInformation.setConfiguration(conf);
    // MiniYARNCluster's RM skips its own keytab login (doSecureLogin is a no-op in the mini
    // cluster): log the process in as the RM, so its servers run as rm/localhost
    UserGroupInformation.loginUserFromKeytab(
        org.apache.hadoop.security.SecurityUtil.getServerPrincipal(
            conf.get(YarnConfiguration.RM_PRINCIPAL), "localhost"),
        conf.get(YarnConfiguration.RM_KEYTAB));
    clientUgi = UserGroupInformation.loginUserFromKeytabAndReturnUGI("client@" + realm,
        clientKeytab.getAbsolutePath());
    kerberosInfo.put("realm", realm);
    kerberosInfo.put("kdc", kdc.getHost() + ":" + kdc.getPort());
    kerberosInfo.put("krb5_conf", kdc.getKrb5conf().getAbsolutePath());
    kerberosInfo.put("client_principal", "client@" + realm);
    kerberosInfo.put("client_keytab", clientKeytab.getAbsolutePath());
    kerberosInfo.put("rm_principal", conf.get(YarnConfiguration.RM_PRINCIPAL));
    kerberosInfo.put("rm_keytab", rmKeytab.getAbsolutePath());
    kerberosInfo.put("nm_principal", "nm/localhost@" + realm);
    kerberosInfo.put("nm_host_principal", "nm/" + host + "@" + realm);
    kerberosInfo.put("nm_keytab", nmKeytab.getAbsolutePath());
    kerberosInfo.put("rpc_protection", conf.get("hadoop.rpc.protection"));
  }

  /**
   * Writes {@code cluster.getConfig()} after start as the AMs' yarn-site.xml, and checks that the
   * bound scheduler and resource-tracker ports really are in it (nodemanager.md 9.1).
   */
  private void writeAmConf() throws IOException {
    Configuration c = cluster.getConfig();
    amConfDir = workDir.resolve("am-conf");
    Files.createDirectories(amConfDir);
    int schedPort = rm().getApplicationMasterService().getBindAddress().getPort();
    int rtPort = rm().getResourceTrackerService().getServer().getListenerAddress().getPort();
    amConfSchedulerAddress = c.get(YarnConfiguration.RM_SCHEDULER_ADDRESS);
    String rt = c.get(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS);
    amConfHasBoundPorts = amConfSchedulerAddress != null
        && amConfSchedulerAddress.endsWith(":" + schedPort) && rt != null
        && rt.endsWith(":" + rtPort);
    if (!amConfHasBoundPorts) {
      throw new IllegalStateException("the cluster's conf lacks the bound ports: scheduler "
          + amConfSchedulerAddress + " (bound " + schedPort + "), resource tracker " + rt
          + " (bound " + rtPort + ")");
    }
    Path tmp = amConfDir.resolve("yarn-site.xml.tmp");
    try (OutputStream out = Files.newOutputStream(tmp)) {
      c.writeXml(out);
    }
    Files.move(tmp, amConfDir.resolve("yarn-site.xml"), StandardCopyOption.REPLACE_EXISTING,
        StandardCopyOption.ATOMIC_MOVE);
  }

  private ResourceManager rm() {
    return cluster.getResourceManager();
  }

  private Map<String, String> addresses() {
    ResourceManager rm = rm();
    Map<String, String> a = new LinkedHashMap<>();
    a.put("resource_tracker", hostPort(rm.getResourceTrackerService().getServer().getListenerAddress()));
    a.put("rm_address", hostPort(rm.getClientRMService().getBindAddress()));
    a.put("scheduler_address", hostPort(rm.getApplicationMasterService().getBindAddress()));
    a.put("admin_address", rm.getConfig().get(YarnConfiguration.RM_ADMIN_ADDRESS));
    a.put("webapp_address", rm.getConfig().get(YarnConfiguration.RM_WEBAPP_ADDRESS));
    return a;
  }

  static String hostPort(InetSocketAddress a) {
    String host = a.getAddress() == null ? a.getHostString()
        : a.getAddress().isAnyLocalAddress() ? "127.0.0.1" : a.getAddress().getHostAddress();
    return host + ":" + a.getPort();
  }

  @Override
  public Map<String, Object> ready() {
    Map<String, Object> r = new LinkedHashMap<>(addresses());
    List<Object> nmList = new ArrayList<>();
    for (int i = 0; i < nms; i++) {
      NodeManager nm = cluster.getNodeManager(i);
      nmList.add(Json.obj("index", i, "node_id", nm.getNMContext().getNodeId().toString()));
    }
    r.put("nms", nmList);
    r.put("nm_expiry_ms", conf.getLong(YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS,
        YarnConfiguration.DEFAULT_RM_NM_EXPIRY_INTERVAL_MS));
    r.put("nm_heartbeat_interval_ms", conf.getLong(
        YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS,
        YarnConfiguration.DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS));
    r.put("profile", args.get("profile", "none"));
    r.put("scheduler", rm().getResourceScheduler().getClass().getName());
    r.put("minimum_allocation_mb", conf.getInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB,
        YarnConfiguration.DEFAULT_RM_SCHEDULER_MINIMUM_ALLOCATION_MB));
    r.put("am_max_attempts", conf.getInt(YarnConfiguration.RM_AM_MAX_ATTEMPTS,
        YarnConfiguration.DEFAULT_RM_AM_MAX_ATTEMPTS));
    r.put("am_conf_dir", amConfDir.toString());
    r.put("am_conf_scheduler_address", amConfSchedulerAddress);
    r.put("am_conf_has_bound_ports", amConfHasBoundPorts);
    if (kerberos) {
      r.put("kerberos", kerberosInfo);
    }
    return r;
  }

  @Override
  public void writeConf(Path confDir) throws Exception {
    Map<String, String> y = new LinkedHashMap<>();
    Map<String, String> a = addresses();
    y.put(YarnConfiguration.RM_HOSTNAME, "localhost");
    y.put(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, a.get("resource_tracker"));
    y.put(YarnConfiguration.RM_ADDRESS, a.get("rm_address"));
    y.put(YarnConfiguration.RM_SCHEDULER_ADDRESS, a.get("scheduler_address"));
    y.put(YarnConfiguration.RM_ADMIN_ADDRESS, a.get("admin_address"));
    y.put(YarnConfiguration.RM_WEBAPP_ADDRESS, a.get("webapp_address"));
    y.put(YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS, conf.get(
        YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS,
        String.valueOf(YarnConfiguration.DEFAULT_RM_NM_EXPIRY_INTERVAL_MS)));
    y.put(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, conf.get(
        YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS,
        String.valueOf(YarnConfiguration.DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS)));
    for (Map.Entry<String, String> e : profileKeys.entrySet()) {
      y.put(e.getKey(), conf.get(e.getKey()));
    }
    Map<String, String> core = new LinkedHashMap<>();
    if (kerberos) {
      core.put("hadoop.security.authentication", "kerberos");
      core.put("hadoop.rpc.protection", conf.get("hadoop.rpc.protection"));
      y.put(YarnConfiguration.RM_PRINCIPAL, conf.get(YarnConfiguration.RM_PRINCIPAL));
    }
    for (String[] kv : args.sets) {
      y.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("yarn-site.xml"), y);
    SiteXml.write(confDir.resolve("core-site.xml"), core);
  }

  @Override
  public Map<String, Object> command(String name, String[] args) throws Exception {
    switch (name) {
      case "nodes":
        return nodes();
      case "nm-stop": {
        int i = Integer.parseInt(args[0]);
        if (i < 0 || i >= nms) {
          throw new IllegalArgumentException("no NodeManager " + i);
        }
        NodeManager nm = cluster.getNodeManager(i);
        String id = nm.getNMContext().getNodeId().toString();
        nm.stop();
        return Json.obj("index", i, "node_id", id, "state", nm.getServiceState().toString());
      }
      case "ping":
        return Json.obj();
      case "app-submit":
        return ShellSubmit.submit(client, conf, workDir, amConfDir, args);
      case "app-wait": {
        if (args.length < 1) {
          throw new IllegalArgumentException("app-wait APP_ID [TIMEOUT_S]");
        }
        long timeout = args.length > 1 ? Long.parseLong(args[1]) : 120;
        return appWait(ApplicationId.fromString(args[0]), timeout);
      }
      case "app-kill": {
        if (args.length < 1) {
          throw new IllegalArgumentException("app-kill APP_ID");
        }
        ApplicationId id = ApplicationId.fromString(args[0]);
        client.killApplication(id);
        return appWait(id, 30);
      }
      default:
        throw new IllegalArgumentException("unknown command " + name
            + " (yarn-rm: nodes, nm-stop I, ping, app-submit KEY=VALUE..., app-wait APP_ID"
            + " [TIMEOUT_S], app-kill APP_ID)");
    }
  }

  /** The RM's own view of its nodes, read from the RM context. */
  private Map<String, Object> nodes() throws Exception {
    ResourceManager rm = rm();
    Map<NodeId, Long> pings = lastPings(rm);
    long now = Time.monotonicNow();
    List<Object> active = new ArrayList<>();
    List<RMNode> sorted = new ArrayList<>(rm.getRMContext().getRMNodes().values());
    sorted.sort(Comparator.comparing(n -> n.getNodeID().toString()));
    for (RMNode n : sorted) {
      Map<String, Object> m = describe(n);
      Long ping = pings.get(n.getNodeID());
      m.put("last_heartbeat_ms_ago", ping == null ? null : now - ping);
      active.add(m);
    }
    List<Object> inactive = new ArrayList<>();
    for (RMNode n : rm.getRMContext().getInactiveRMNodes().values()) {
      inactive.add(describe(n));
    }
    return Json.obj("nodes", active, "inactive", inactive);
  }

  static Map<String, Object> describe(RMNode n) {
    Resource total = n.getTotalCapability();
    Map<String, Object> m = Json.obj(
        "node_id", n.getNodeID().toString(),
        "host", n.getHostName(),
        "port", n.getCommandPort(),
        "state", n.getState().toString(),
        "rack", n.getRackName(),
        "http_address", n.getHttpAddress(),
        "nm_version", n.getNodeManagerVersion(),
        "memory_mb", total == null ? null : total.getMemorySize(),
        "vcores", total == null ? null : total.getVirtualCores(),
        "health_report", n.getHealthReport(),
        "last_health_report_time", n.getLastHealthReportTime());
    NodeHeartbeatResponse last = n.getLastNodeHeartBeatResponse();
    m.put("response_id", last == null ? null : last.getResponseId());
    List<String> apps = new ArrayList<>();
    for (ApplicationId a : n.getRunningApps()) {
      apps.add(a.toString());
    }
    m.put("running_apps", apps);
    if (n instanceof RMNodeImpl impl) {
      m.put("launched_containers", ids(impl.getLaunchedContainers()));
      m.put("completed_containers", ids(impl.getCompletedContainers()));
    }
    m.put("containers_to_clean_up", ids(n.getContainersToCleanUp()));
    List<String> appsToClean = new ArrayList<>();
    for (ApplicationId a : n.getAppsToCleanup()) {
      appsToClean.add(a.toString());
    }
    m.put("apps_to_clean_up", appsToClean);
    return m;
  }

  private static List<String> ids(java.util.Collection<ContainerId> c) {
    List<String> l = new ArrayList<>();
    for (ContainerId id : c) {
      l.add(id.toString());
    }
    l.sort(null);
    return l;
  }

  /**
   * The NM liveliness monitor's last-ping times (monotonic ms): the RM keeps them in a private map,
   * read here by reflection since nothing public exposes them.
   */
  @SuppressWarnings("unchecked")
  static Map<NodeId, Long> lastPings(ResourceManager rm) throws Exception {
    Field monitorField = ResourceManager.class.getDeclaredField("nmLivelinessMonitor");
    monitorField.setAccessible(true);
    Object monitor = monitorField.get(rm);
    Field running = AbstractLivelinessMonitor.class.getDeclaredField("running");
    running.setAccessible(true);
    synchronized (monitor) {
      return new LinkedHashMap<>((Map<NodeId, Long>) running.get(monitor));
    }
  }

  /** Whether the RM's app and every one of its attempts reached a final state. */
  private boolean rmFinal(ApplicationId id) {
    RMApp app = rm().getRMContext().getRMApps().get(id);
    if (app == null) {
      return true;
    }
    RMAppState s = app.getState();
    if (s != RMAppState.FINISHED && s != RMAppState.FAILED && s != RMAppState.KILLED) {
      return false;
    }
    for (RMAppAttempt a : app.getAppAttempts().values()) {
      RMAppAttemptState as = a.getAppAttemptState();
      if (as != RMAppAttemptState.FINISHED && as != RMAppAttemptState.FAILED
          && as != RMAppAttemptState.KILLED) {
        return false;
      }
    }
    return true;
  }

  /**
   * Polls the application until it ends (client report final, and the RM's app and attempts
   * final: FINISHING ends only when the AM container's completion arrives) or {@code timeoutS}
   * passes; then describes it.
   */
  private Map<String, Object> appWait(ApplicationId id, long timeoutS) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
    ApplicationReport r;
    boolean timedOut;
    while (true) {
      r = client.getApplicationReport(id);
      YarnApplicationState s = r.getYarnApplicationState();
      // the client report says FINISHED already while the RM waits (FINISHING) for the AM
      // container's completion from its NodeManager: wait for the RM's own final states too
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
    List<Object> attempts = new ArrayList<>();
    RMApp rmApp = rm().getRMContext().getRMApps().get(id);
    if (rmApp != null) {
      List<RMAppAttempt> list = new ArrayList<>(rmApp.getAppAttempts().values());
      list.sort(Comparator.comparing(a -> a.getAppAttemptId().getAttemptId()));
      for (RMAppAttempt a : list) {
        Container master = a.getMasterContainer();
        attempts.add(Json.obj(
            "attempt_id", a.getAppAttemptId().toString(),
            "attempt", a.getAppAttemptId().getAttemptId(),
            "state", a.getAppAttemptState().toString(),
            "am_container_id", master == null ? null : master.getId().toString(),
            "am_node_id", master == null ? null : master.getNodeId().toString(),
            // the RM records it only when the AM container ends the attempt (a failed
            // attempt); after an unregistered AM it stays -1000 (INVALID)
            "am_container_exit_status", a instanceof RMAppAttemptImpl impl
                ? impl.getAMContainerExitStatus() : null,
            "diagnostics", a.getDiagnostics()));
      }
    }
    return Json.obj(
        "app_id", id.toString(),
        "timed_out", timedOut,
        "rm_app_state", rmApp == null ? null : rmApp.getState().toString(),
        "state", r.getYarnApplicationState().toString(),
        "final_status", r.getFinalApplicationStatus().toString(),
        "diagnostics", r.getDiagnostics(),
        "attempt_count", attempts.size(),
        "attempts", attempts,
        "current_attempt_id", r.getCurrentApplicationAttemptId() == null ? null
            : r.getCurrentApplicationAttemptId().toString());
  }

  @Override
  public void close() {
    if (client != null) {
      client.stop();
    }
    if (cluster != null) {
      cluster.stop();
    }
    if (kdc != null) {
      kdc.stop();
    }
  }
}
