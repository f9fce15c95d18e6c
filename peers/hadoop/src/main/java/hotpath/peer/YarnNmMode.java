package hotpath.peer;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.service.Service;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;

/**
 * {@code yarn-nm --rm HOST:PORT}: one real NodeManager in this JVM, registered with the resource
 * tracker at HOST:PORT. {@code nm-stop} stops it (the NM unregisters); {@code nm-start} starts a
 * fresh one on the same NM port, hence the same NodeId.
 *
 * <p>{@code --kerberos true}: a MiniKdc (realm EXAMPLE.COM, TCP) starts first, holding
 * {@code nm/localhost} + {@code HTTP/localhost} (nm.keytab), {@code rm/localhost} (rm.keytab) and
 * {@code client} (client.keytab). The NM runs Kerberized: {@code hadoop.security.authentication=
 * kerberos}, {@code yarn.nodemanager.principal=nm/localhost@REALM} with its keytab (it logs in
 * itself), and expects the RM as {@code yarn.resourcemanager.principal=rm/localhost@REALM}
 * (both overridable by {@code --set}; {@code hadoop.rpc.protection} is {@code authentication}
 * unless set). Then {@code --rm} is optional: the RM needs the KDC's rm.keytab before it can start,
 * so without {@code --rm} the NM waits for {@code nm-start HOST:PORT}. READY carries
 * {@code kerberos}: {@code realm}, {@code kdc}, {@code krb5_conf}, {@code client_principal},
 * {@code client_keytab}, {@code nm_principal}, {@code nm_keytab}, {@code rm_principal},
 * {@code rm_keytab}, {@code rpc_protection}.
 */
final class YarnNmMode implements Mode {
  private final Args args;
  private final YarnConfiguration conf;
  private final Path workDir;
  private final boolean kerberos;
  private String rm;
  private MiniKdc kdc;
  private final Map<String, Object> kerberosInfo = new LinkedHashMap<>();
  private NodeManager nm;
  private NodeId nodeId;

  YarnNmMode(Args args, Path workDir) throws Exception {
    this.args = args;
    this.workDir = workDir;
    this.kerberos = Boolean.parseBoolean(args.get("kerberos", "false"));
    this.rm = kerberos ? args.get("rm", null) : args.require("rm");
    this.conf = YarnConf.base(args, workDir);
    if (rm != null) {
      conf.set(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, rm);
    }
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
  public void start() throws Exception {
    if (kerberos) {
      startKdc();
    }
    if (rm != null) {
      startNm();
    }
  }

  /** The KDC, the principals and keytabs, and the NM's security keys. */
  private void startKdc() throws Exception {
    File kdcDir = workDir.resolve("kdc").toFile();
    if (!kdcDir.mkdirs() && !kdcDir.isDirectory()) {
      throw new IllegalStateException("cannot create " + kdcDir);
    }
    kdc = new MiniKdc(MiniKdc.createConf(), kdcDir);
    kdc.start();
    String realm = kdc.getRealm();
    File nmKeytab = new File(kdcDir, "nm.keytab");
    kdc.createPrincipal(nmKeytab, "nm/localhost", "HTTP/localhost");
    File rmKeytab = new File(kdcDir, "rm.keytab");
    kdc.createPrincipal(rmKeytab, "rm/localhost");
    File clientKeytab = new File(kdcDir, "client.keytab");
    kdc.createPrincipal(clientKeytab, "client");
    // core-default.xml gives hadoop.rpc.protection a value: only a --set overrides ours
    setIfAbsent("hadoop.rpc.protection", "authentication");
    conf.set("hadoop.security.authentication", "kerberos");
    setIfAbsent(YarnConfiguration.NM_PRINCIPAL, "nm/localhost@" + realm);
    setIfAbsent(YarnConfiguration.NM_KEYTAB, nmKeytab.getAbsolutePath());
    setIfAbsent(YarnConfiguration.RM_PRINCIPAL, "rm/localhost@" + realm);
    setIfAbsent(YarnConfiguration.NM_WEBAPP_SPNEGO_USER_NAME_KEY, "HTTP/localhost@" + realm);
    setIfAbsent(YarnConfiguration.NM_WEBAPP_SPNEGO_KEYTAB_FILE_KEY, nmKeytab.getAbsolutePath());
    UserGroupInformation.setConfiguration(conf);
    kerberosInfo.put("realm", realm);
    kerberosInfo.put("kdc", kdc.getHost() + ":" + kdc.getPort());
    kerberosInfo.put("krb5_conf", kdc.getKrb5conf().getAbsolutePath());
    kerberosInfo.put("client_principal", "client@" + realm);
    kerberosInfo.put("client_keytab", clientKeytab.getAbsolutePath());
    kerberosInfo.put("nm_principal", conf.get(YarnConfiguration.NM_PRINCIPAL));
    kerberosInfo.put("nm_keytab", nmKeytab.getAbsolutePath());
    kerberosInfo.put("rm_principal", conf.get(YarnConfiguration.RM_PRINCIPAL));
    kerberosInfo.put("rm_keytab", rmKeytab.getAbsolutePath());
    kerberosInfo.put("rpc_protection", conf.get("hadoop.rpc.protection"));
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
    Map<String, Object> r = status();
    if (kerberos) {
      r.put("kerberos", kerberosInfo);
    }
    return r;
  }

  private Map<String, Object> status() {
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("rm", rm);
    r.put("node_id", nodeId == null ? null : nodeId.toString());
    r.put("state", nm == null ? "NONE" : nm.getServiceState().toString());
    if (nm != null) {
      r.put("http_port", nm.getNMContext().getHttpPort());
      r.put("containers", nm.getNMContext().getContainers().size());
      Map<String, Object> apps = new LinkedHashMap<>();
      nm.getNMContext().getApplications().forEach(
          (id, app) -> apps.put(id.toString(), app.getApplicationState().toString()));
      r.put("applications", apps);
      r.put("healthy", nm.getNodeHealthChecker().isHealthy());
    }
    return r;
  }

  @Override
  public void writeConf(Path confDir) throws Exception {
    Map<String, String> y = new LinkedHashMap<>();
    if (rm != null) {
      y.put(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, rm);
    }
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
        if (a.length > 0) {
          rm = a[0];
          conf.set(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, rm);
        }
        // then KEY=VALUE settings for this and later starts (e.g. hadoop.rpc.protection)
        for (int i = 1; i < a.length; i++) {
          String[] kv = a[i].split("=", 2);
          if (kv.length != 2) {
            throw new IllegalArgumentException("nm-start: not KEY=VALUE: " + a[i]);
          }
          conf.set(kv[0], kv[1]);
        }
        if (rm == null) {
          throw new IllegalArgumentException("nm-start RM_HOST:PORT: no resource tracker yet");
        }
        startNm();
        return status();
      case "status":
        return status();
      case "ping":
        return Json.obj();
      default:
        throw new IllegalArgumentException("unknown command " + name
            + " (yarn-nm: status, nm-stop, nm-start [RM_HOST:PORT [KEY=VALUE...]], ping)");
    }
  }

  @Override
  public void close() {
    if (nm != null) {
      nm.stop();
    }
    if (kdc != null) {
      kdc.stop();
    }
  }
}
