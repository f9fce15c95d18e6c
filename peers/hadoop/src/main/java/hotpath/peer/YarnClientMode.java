package hotpath.peer;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.PrivilegedExceptionAction;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptReport;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.QueueInfo;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.api.records.YarnClusterMetrics;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.client.api.YarnClientApplication;
import org.apache.hadoop.yarn.client.cli.ApplicationCLI;
import org.apache.hadoop.yarn.client.cli.NodeCLI;
import org.apache.hadoop.yarn.client.cli.YarnCLI;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * {@code yarn-client --rm HOST:PORT --scheduler HOST:PORT [--set key=value]...}: Hadoop's own
 * client side against any ResourceManager (hotpath's included): a {@link YarnClient} for the
 * {@link ShellAm} application ({@code app-submit}, {@code app-wait}, {@code app-kill}), the
 * report calls ({@code app-report}, {@code apps}, {@code nodes}, {@code metrics},
 * {@code queue}, {@code new-app}) and Hadoop's command-line classes ({@code cli application
 * -list}, {@code cli node -list -all}: what {@code yarn application} and {@code yarn node} run).
 *
 * <p>{@code as USER COMMAND ARGS...} runs a command as another SIMPLE user (its own YarnClient,
 * under {@code UserGroupInformation.createRemoteUser(USER).doAs}).
 *
 * <p>RM delegation tokens ({@link RmTokens}): {@code rmdt-get FILE RENEWER},
 * {@code rmdt-renew FILE}, {@code rmdt-cancel FILE}, {@code whoami}, and
 * {@code as-keytab PRINCIPAL KEYTAB COMMAND ARGS...}. A peer started without a login, with
 * {@code HADOOP_TOKEN_FILE_LOCATION} set, talks to the RM with the file's token.
 *
 * <p>{@code --principal P --keytab K [--krb5-conf F]} (with {@code --set
 * hadoop.security.authentication=kerberos} and {@code yarn.resourcemanager.principal}): the
 * client logs in from the keytab first, so it talks to a Kerberized RM as P.
 *
 * <p>Only the client's view is known here: an application has ended when its report says
 * FINISHED, FAILED or KILLED (unlike {@code yarn-rm}, which also waits for the RM's attempts).
 */
final class YarnClientMode implements Mode {
  private final Args args;
  private final Path workDir;
  private final YarnConfiguration conf;
  private YarnClient client;
  private final Map<String, YarnClient> clients = new LinkedHashMap<>();
  private Path amConfDir;

  YarnClientMode(Args args, Path workDir) {
    this.args = args;
    this.workDir = workDir;
    this.conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", workDir.resolve("tmp").toString());
    conf.set(YarnConfiguration.RM_ADDRESS, args.require("rm"));
    conf.set(YarnConfiguration.RM_SCHEDULER_ADDRESS, args.require("scheduler"));
    // a dead RM fails a command in seconds, not after the default 15 minutes
    conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 20_000);
    conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, 500);
    conf.setLong(YarnConfiguration.CLIENT_NM_CONNECT_MAX_WAIT_MS, 5000);
    conf.setLong(YarnConfiguration.CLIENT_NM_CONNECT_RETRY_INTERVAL_MS, 1000);
    conf.setBoolean(YarnConfiguration.TIMELINE_SERVICE_ENABLED, false);
    for (String[] kv : args.sets) {
      conf.set(kv[0], kv[1]);
    }
  }

  @Override
  public void start() throws Exception {
    amConfDir = workDir.resolve("am-conf");
    Files.createDirectories(amConfDir);
    Path tmp = amConfDir.resolve("yarn-site.xml.tmp");
    try (OutputStream out = Files.newOutputStream(tmp)) {
      conf.writeXml(out);
    }
    Files.move(tmp, amConfDir.resolve("yarn-site.xml"), StandardCopyOption.REPLACE_EXISTING,
        StandardCopyOption.ATOMIC_MOVE);
    DriverSupport.loginIfAsked(args, conf);
    if (!args.has("keytab") && UserGroupInformation.AuthenticationMethod.KERBEROS.name()
        .equalsIgnoreCase(conf.get("hadoop.security.authentication", ""))) {
      // no login of our own: UGI's login user (the ticket cache if any, plus the tokens of
      // HADOOP_TOKEN_FILE_LOCATION), with this configuration's security settings
      if (args.has("krb5-conf")) {
        System.setProperty("java.security.krb5.conf", args.get("krb5-conf", null));
      }
      UserGroupInformation.setConfiguration(conf);
    }
    client = YarnClient.createYarnClient();
    client.init(conf);
    client.start();
  }

  @Override
  public Map<String, Object> ready() {
    return Json.obj("rm_address", conf.get(YarnConfiguration.RM_ADDRESS),
        "scheduler_address", conf.get(YarnConfiguration.RM_SCHEDULER_ADDRESS),
        "am_conf_dir", amConfDir.toString());
  }

  @Override
  public void writeConf(Path confDir) throws Exception {
    Map<String, String> y = new LinkedHashMap<>();
    y.put(YarnConfiguration.RM_ADDRESS, conf.get(YarnConfiguration.RM_ADDRESS));
    y.put(YarnConfiguration.RM_SCHEDULER_ADDRESS, conf.get(YarnConfiguration.RM_SCHEDULER_ADDRESS));
    for (String[] kv : args.sets) {
      y.put(kv[0], kv[1]);
    }
    SiteXml.write(confDir.resolve("yarn-site.xml"), y);
    SiteXml.write(confDir.resolve("core-site.xml"), Map.of());
  }

  @Override
  public Map<String, Object> command(String name, String[] a) throws Exception {
    switch (name) {
      case "ping":
        return Json.obj();
      case "app-submit":
        return ShellSubmit.submit(client, conf, workDir, amConfDir, a);
      case "app-wait":
        need(a, 1, "app-wait APP_ID [TIMEOUT_S]");
        return appWait(ApplicationId.fromString(a[0]), a.length > 1 ? Long.parseLong(a[1]) : 120);
      case "app-kill": {
        need(a, 1, "app-kill APP_ID");
        ApplicationId id = ApplicationId.fromString(a[0]);
        client.killApplication(id);
        return appWait(id, 30);
      }
      case "app-report":
        need(a, 1, "app-report APP_ID");
        return report(client.getApplicationReport(ApplicationId.fromString(a[0])));
      case "apps": {
        List<Object> list = new ArrayList<>();
        for (ApplicationReport r : client.getApplications()) {
          list.add(report(r));
        }
        return Json.obj("apps", list);
      }
      case "nodes": {
        List<Object> list = new ArrayList<>();
        for (NodeReport n : client.getNodeReports(EnumSet.allOf(NodeState.class).toArray(
            new NodeState[0]))) {
          list.add(Json.obj("node_id", n.getNodeId().toString(),
              "state", n.getNodeState().toString(), "http_address", n.getHttpAddress(),
              "rack", n.getRackName(), "containers", n.getNumContainers(),
              "capability", resource(n.getCapability()), "used", resource(n.getUsed()),
              "health_report", n.getHealthReport()));
        }
        return Json.obj("nodes", list);
      }
      case "metrics": {
        YarnClusterMetrics m = client.getYarnClusterMetrics();
        return Json.obj("node_managers", m.getNumNodeManagers(),
            "active", m.getNumActiveNodeManagers(), "lost", m.getNumLostNodeManagers(),
            "unhealthy", m.getNumUnhealthyNodeManagers(),
            "decommissioned", m.getNumDecommissionedNodeManagers());
      }
      case "queue": {
        QueueInfo q = client.getQueueInfo(a.length > 0 ? a[0] : "default");
        if (q == null) {
          return Json.obj("queue", null);
        }
        return Json.obj("queue", q.getQueueName(), "state", String.valueOf(q.getQueueState()),
            "capacity", (double) q.getCapacity(), "current_capacity",
            (double) q.getCurrentCapacity(), "applications", q.getApplications() == null ? 0
                : q.getApplications().size());
      }
      case "new-app": {
        YarnClientApplication app = client.createApplication();
        return Json.obj("app_id",
            app.getApplicationSubmissionContext().getApplicationId().toString(),
            "maximum_capability",
            resource(app.getNewApplicationResponse().getMaximumResourceCapability()));
      }
      case "cli":
        need(a, 1, "cli application|node ARGS...");
        return cli(a);
      case "as":
        need(a, 2, "as USER COMMAND ARGS...");
        return as(a[0], a[1], Arrays.copyOfRange(a, 2, a.length));
      case "rmdt-get":
        need(a, 2, "rmdt-get FILE RENEWER");
        return RmTokens.get(client, conf, a[0], a[1]);
      case "rmdt-renew":
        need(a, 1, "rmdt-renew FILE");
        return RmTokens.renew(conf, a[0]);
      case "rmdt-cancel":
        need(a, 1, "rmdt-cancel FILE");
        return RmTokens.cancel(conf, a[0]);
      case "whoami":
        return RmTokens.whoami();
      case "as-keytab":
        need(a, 3, "as-keytab PRINCIPAL KEYTAB COMMAND ARGS...");
        return asKeytab(a[0], a[1], a[2], Arrays.copyOfRange(a, 3, a.length));
      default:
        throw new IllegalArgumentException("unknown command " + name
            + " (yarn-client: ping, app-submit KEY=VALUE..., app-wait APP_ID [TIMEOUT_S],"
            + " app-kill APP_ID, app-report APP_ID, apps, nodes, metrics, queue [NAME], new-app,"
            + " cli application|node ARGS..., as USER COMMAND ARGS..., rmdt-get FILE RENEWER,"
            + " rmdt-renew FILE, rmdt-cancel FILE, whoami,"
            + " as-keytab PRINCIPAL KEYTAB COMMAND ARGS...)");
    }
  }

  /**
   * {@code as USER COMMAND ARGS...}: the command as another (SIMPLE) user, with a YarnClient of
   * its own, made and used inside {@code UserGroupInformation.createRemoteUser(USER).doAs} (a
   * YarnClient's connections keep the user it was started as).
   */
  private Map<String, Object> as(String user, String name, String[] rest) throws Exception {
    UserGroupInformation ugi = UserGroupInformation.createRemoteUser(user);
    YarnClient mine = clients.get(user);
    if (mine == null) {
      mine = ugi.doAs((PrivilegedExceptionAction<YarnClient>) () -> {
        YarnClient c = YarnClient.createYarnClient();
        c.init(conf);
        c.start();
        return c;
      });
      clients.put(user, mine);
    }
    YarnClient own = client;
    client = mine;
    try {
      return ugi.doAs((PrivilegedExceptionAction<Map<String, Object>>) () -> command(name, rest));
    } catch (java.lang.reflect.UndeclaredThrowableException e) {
      throw e.getCause() instanceof Exception x ? x : e;
    } finally {
      client = own;
    }
  }

  /**
   * {@code as-keytab PRINCIPAL KEYTAB COMMAND ARGS...}: a token command ({@code rmdt-renew},
   * {@code rmdt-cancel}, {@code whoami}) as another Kerberos user, logged in from its keytab
   * ({@code loginUserFromKeytabAndReturnUGI}).
   */
  private Map<String, Object> asKeytab(String principal, String keytab, String name,
      String[] rest) throws Exception {
    UserGroupInformation ugi =
        UserGroupInformation.loginUserFromKeytabAndReturnUGI(principal, keytab);
    try {
      return ugi.doAs((PrivilegedExceptionAction<Map<String, Object>>) () -> command(name, rest));
    } catch (java.lang.reflect.UndeclaredThrowableException e) {
      throw e.getCause() instanceof Exception x ? x : e;
    }
  }

  private static void need(String[] a, int n, String usage) {
    if (a.length < n) {
      throw new IllegalArgumentException(usage);
    }
  }

  private static Map<String, Object> resource(Resource r) {
    return r == null ? null : Json.obj("memory_mb", r.getMemorySize(), "vcores",
        r.getVirtualCores());
  }

  private static Map<String, Object> report(ApplicationReport r) {
    return Json.obj("app_id", r.getApplicationId().toString(), "name", r.getName(),
        "queue", r.getQueue(), "user", r.getUser(), "type", r.getApplicationType(),
        "state", r.getYarnApplicationState().toString(),
        "final_status", r.getFinalApplicationStatus().toString(),
        "progress", (double) r.getProgress(), "diagnostics", r.getDiagnostics(),
        "host", r.getHost(), "rpc_port", r.getRpcPort(),
        "current_attempt_id", r.getCurrentApplicationAttemptId() == null ? null
            : r.getCurrentApplicationAttemptId().toString(),
        "start_time", r.getStartTime(), "finish_time", r.getFinishTime());
  }

  /** Polls the client report until a final state or {@code timeoutS}; then describes it. */
  private Map<String, Object> appWait(ApplicationId id, long timeoutS) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
    ApplicationReport r;
    boolean timedOut;
    while (true) {
      r = client.getApplicationReport(id);
      YarnApplicationState s = r.getYarnApplicationState();
      if (s == YarnApplicationState.FINISHED || s == YarnApplicationState.FAILED
          || s == YarnApplicationState.KILLED) {
        timedOut = false;
        break;
      }
      if (System.nanoTime() > deadline) {
        timedOut = true;
        break;
      }
      Thread.sleep(100);
    }
    Map<String, Object> out = report(r);
    out.put("timed_out", timedOut);
    // attempts are an extra (getApplicationAttempts is beyond what a thin RM must serve)
    try {
      List<Object> attempts = new ArrayList<>();
      for (ApplicationAttemptReport at : client.getApplicationAttempts(id)) {
        attempts.add(Json.obj("attempt_id", at.getApplicationAttemptId().toString(),
            "state", at.getYarnApplicationAttemptState().toString(),
            "am_container_id", at.getAMContainerId() == null ? null
                : at.getAMContainerId().toString(),
            "diagnostics", at.getDiagnostics()));
      }
      out.put("attempts", attempts);
    } catch (Exception e) {
      out.put("attempts", null);
      out.put("attempts_error", e.getClass().getName() + ": " + e.getMessage());
    }
    return out;
  }

  /**
   * Runs Hadoop's CLI class as {@code yarn application|applicationattempt|container ...} and
   * {@code yarn node ...} do (the yarn script passes the sub-command word to ApplicationCLI, not
   * to NodeCLI), with this mode's
   * configuration; returns its exit code and what it printed.
   */
  private Map<String, Object> cli(String[] a) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    YarnCLI cli;
    String[] rest;
    switch (a[0]) {
      case "application", "applicationattempt", "container" -> {
        cli = new ApplicationCLI();
        rest = a;
      }
      case "node" -> {
        cli = new NodeCLI();
        rest = Arrays.copyOfRange(a, 1, a.length);
      }
      default -> throw new IllegalArgumentException(
          "cli application|applicationattempt|container|node ARGS..., got " + a[0]);
    }
    int rc;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      cli.setSysOutPrintStream(o);
      cli.setSysErrPrintStream(e);
      cli.setConf(conf);
      try {
        rc = cli.run(rest);
      } finally {
        cli.stop();
      }
    }
    return Json.obj("exit_code", rc, "stdout", out.toString(StandardCharsets.UTF_8),
        "stderr", err.toString(StandardCharsets.UTF_8));
  }

  @Override
  public void close() {
    if (client != null) {
      client.stop();
    }
    for (YarnClient c : clients.values()) {
      c.stop();
    }
  }
}
