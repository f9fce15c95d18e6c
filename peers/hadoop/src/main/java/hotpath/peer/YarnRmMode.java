package hotpath.peer;

import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
 * {@code yarn-rm [--nms K] [--set key=value]...}: a real ResourceManager (MiniYARNCluster) with K
 * in-JVM NodeManagers (default 0), whose resource-tracker port any NodeManager can register with.
 */
final class YarnRmMode implements Mode {
  private final Args args;
  private final YarnConfiguration conf;
  private final int nms;
  private MiniYARNCluster cluster;

  YarnRmMode(Args args, Path workDir) {
    this.args = args;
    this.conf = YarnConf.base(args, workDir);
    this.nms = args.getInt("nms", 0);
  }

  @Override
  public void start() throws Exception {
    cluster = new MiniYARNCluster("hotpath-peer", 1, nms, 1, 1);
    cluster.init(conf);
    cluster.start();
    if (nms > 0 && !cluster.waitForNodeManagersToConnect(120_000)) {
      throw new IllegalStateException(nms + " NodeManagers did not register in 120 s");
    }
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
    for (String[] kv : args.sets) {
      y.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("yarn-site.xml"), y);
    SiteXml.write(confDir.resolve("core-site.xml"), Map.of());
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
      default:
        throw new IllegalArgumentException("unknown command " + name
            + " (yarn-rm: nodes, nm-stop I, ping)");
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

  private static Map<String, Object> describe(RMNode n) {
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
  private static Map<NodeId, Long> lastPings(ResourceManager rm) throws Exception {
    Field monitorField = ResourceManager.class.getDeclaredField("nmLivelinessMonitor");
    monitorField.setAccessible(true);
    Object monitor = monitorField.get(rm);
    Field running = AbstractLivelinessMonitor.class.getDeclaredField("running");
    running.setAccessible(true);
    synchronized (monitor) {
      return new LinkedHashMap<>((Map<NodeId, Long>) running.get(monitor));
    }
  }

  @Override
  public void close() {
    if (cluster != null) {
      cluster.stop();
    }
  }
}
