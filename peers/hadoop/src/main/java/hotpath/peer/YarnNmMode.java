package hotpath.peer;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.service.Service;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;

/**
 * {@code yarn-nm --rm HOST:PORT}: one real NodeManager in this JVM, registered with the resource
 * tracker at HOST:PORT. {@code nm-stop} stops it (the NM unregisters); {@code nm-start} starts a
 * fresh one on the same NM port, hence the same NodeId.
 */
final class YarnNmMode implements Mode {
  private final Args args;
  private final YarnConfiguration conf;
  private final String rm;
  private NodeManager nm;
  private NodeId nodeId;

  YarnNmMode(Args args, Path workDir) throws Exception {
    this.args = args;
    this.rm = args.require("rm");
    this.conf = YarnConf.base(args, workDir);
    conf.set(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, rm);
    setIfAbsent(YarnConfiguration.NM_ADDRESS, "127.0.0.1:0");
    setIfAbsent(YarnConfiguration.NM_LOCALIZER_ADDRESS, "127.0.0.1:0");
    setIfAbsent(YarnConfiguration.NM_COLLECTOR_SERVICE_ADDRESS, "127.0.0.1:0");
    Path local = workDir.resolve("nm-local");
    Path logs = workDir.resolve("nm-logs");
    Files.createDirectories(local);
    Files.createDirectories(logs);
    setIfAbsent(YarnConfiguration.NM_LOCAL_DIRS, local.toString());
    setIfAbsent(YarnConfiguration.NM_LOG_DIRS, logs.toString());
  }

  private void setIfAbsent(String key, String value) {
    boolean given = args.sets.stream().anyMatch(kv -> kv[0].equals(key));
    if (!given) {
      conf.set(key, value);
    }
  }

  @Override
  public void start() {
    startNm();
  }

  private void startNm() {
    NodeManager n = new NodeManager();
    n.init(new YarnConfiguration(conf));
    n.start();
    if (n.getServiceState() != Service.STATE.STARTED) {
      throw new IllegalStateException("NodeManager did not start: " + n.getFailureCause());
    }
    nm = n;
    nodeId = n.getNMContext().getNodeId();
    // a restarted NM keeps its NodeId: pin the port it got
    conf.set(YarnConfiguration.NM_ADDRESS, nodeId.getHost() + ":" + nodeId.getPort());
  }

  @Override
  public Map<String, Object> ready() {
    return status();
  }

  private Map<String, Object> status() {
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("rm", rm);
    r.put("node_id", nodeId == null ? null : nodeId.toString());
    r.put("state", nm == null ? "NONE" : nm.getServiceState().toString());
    if (nm != null) {
      r.put("http_port", nm.getNMContext().getHttpPort());
      r.put("containers", nm.getNMContext().getContainers().size());
      r.put("healthy", nm.getNodeHealthChecker().isHealthy());
    }
    return r;
  }

  @Override
  public void writeConf(Path confDir) throws Exception {
    Map<String, String> y = new LinkedHashMap<>();
    y.put(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, rm);
    y.put(YarnConfiguration.NM_ADDRESS, conf.get(YarnConfiguration.NM_ADDRESS));
    for (String[] kv : args.sets) {
      y.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("yarn-site.xml"), y);
    SiteXml.write(confDir.resolve("core-site.xml"), Map.of());
  }

  @Override
  public Map<String, Object> command(String name, String[] a) {
    switch (name) {
      case "nm-stop":
        if (nm != null) {
          nm.stop();
        }
        return status();
      case "nm-start":
        if (nm != null && nm.getServiceState() == Service.STATE.STARTED) {
          throw new IllegalStateException("NodeManager already running");
        }
        startNm();
        return status();
      case "status":
        return status();
      case "ping":
        return Json.obj();
      default:
        throw new IllegalArgumentException("unknown command " + name
            + " (yarn-nm: status, nm-stop, nm-start, ping)");
    }
  }

  @Override
  public void close() {
    if (nm != null) {
      nm.stop();
    }
  }
}
