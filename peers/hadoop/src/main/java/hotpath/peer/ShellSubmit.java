package hotpath.peer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.ApplicationAccessType;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationSubmissionContext;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.client.api.YarnClientApplication;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * The client half of the {@link ShellAm} application, shared by {@code yarn-rm} (Java's own RM)
 * and {@code yarn-client} (any RM, hotpath's included): {@code app-submit key=value...} through a
 * {@link YarnClient}, with the AMs' conf dir (a yarn-site.xml naming the scheduler address) on
 * the AM's class path.
 */
final class ShellSubmit {
  private ShellSubmit() {}

  /** Keys {@code app-submit} accepts, with their defaults (null: none). */
  static final Map<String, String> SUBMIT_KEYS = YarnRmMode.profile(
      "mode", "shell", "containers", "1", "exit", "", "stop", "", "sleep", "", "hold", "",
      "release", "", "bad_resource", "", "am_mb", "256",
      "container_mb", "128", "container_vcores", "1", "fail_attempt", "0", "result", null,
      "shared", null, "queue", "default", "per_node", "4", "timeout_s", "300",
      "heartbeat_ms", "200", "name", "hotpath-shell", "nm_proxies", "0", "rm_retry_ms", "",
      "acl_view", null, "acl_modify", null);

  /**
   * {@code app-submit key=value...}: submits a {@link ShellAm} application. Its AM container gets
   * two FILE/APPLICATION local resources with exact size and mtime ({@code shellCommands}: the
   * plan; {@code AppMaster.jar}: the peer jar, when built), CLASSPATH = {@code {{CLASSPATH}}}, the
   * work dir's jars, the AM conf dir and this JVM's class path (valid because the NMs run on this
   * machine), and DistributedShell's command shape.
   */
  static Map<String, Object> submit(YarnClient client, Configuration conf, Path workDir,
      Path amConfDir, String[] words) throws Exception {
    Map<String, String> o = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : SUBMIT_KEYS.entrySet()) {
      if (e.getValue() != null) {
        o.put(e.getKey(), e.getValue());
      }
    }
    for (String w : words) {
      int eq = w.indexOf('=');
      if (eq <= 0 || !SUBMIT_KEYS.containsKey(w.substring(0, eq))) {
        throw new IllegalArgumentException("app-submit wants KEY=VALUE with KEY one of "
            + SUBMIT_KEYS.keySet() + ", got " + w);
      }
      o.put(w.substring(0, eq), w.substring(eq + 1));
    }
    String amMode = o.get("mode");
    if (!amMode.equals("shell") && !amMode.equals("bench")) {
      throw new IllegalArgumentException("mode must be shell or bench, got " + amMode);
    }
    if (!o.containsKey("result")) {
      throw new IllegalArgumentException("app-submit needs result=FILE");
    }
    int amMb = Integer.parseInt(o.get("am_mb"));

    YarnClientApplication app = client.createApplication();
    ApplicationSubmissionContext ctx = app.getApplicationSubmissionContext();
    ApplicationId id = ctx.getApplicationId();
    Path dir = workDir.resolve("apps").resolve(id.toString());
    Files.createDirectories(dir);
    Path shared = o.containsKey("shared") ? Paths.get(o.get("shared")).toAbsolutePath()
        : dir.resolve("shared");
    Files.createDirectories(shared);

    Properties plan = new Properties();
    plan.setProperty("containers", o.get("containers"));
    plan.setProperty("exit", o.get("exit"));
    plan.setProperty("stop", o.get("stop"));
    plan.setProperty("sleep", o.get("sleep"));
    plan.setProperty("hold", o.get("hold"));
    plan.setProperty("release", o.get("release"));
    plan.setProperty("bad-resource", o.get("bad_resource"));
    plan.setProperty("container-mb", o.get("container_mb"));
    plan.setProperty("container-vcores", o.get("container_vcores"));
    plan.setProperty("result", Paths.get(o.get("result")).toAbsolutePath().toString());
    plan.setProperty("shared-dir", shared.toString());
    plan.setProperty("per-node", o.get("per_node"));
    plan.setProperty("timeout-s", o.get("timeout_s"));
    plan.setProperty("heartbeat-ms", o.get("heartbeat_ms"));
    plan.setProperty("nm-proxies", o.get("nm_proxies"));
    plan.setProperty("rm-retry-ms", o.get("rm_retry_ms"));
    Path planFile = dir.resolve("shellCommands");
    try (var w = Files.newBufferedWriter(planFile, StandardCharsets.UTF_8)) {
      plan.store(w, "ShellAm plan for " + id);
    }
    Map<String, LocalResource> resources = new LinkedHashMap<>();
    Map<String, Object> described = new LinkedHashMap<>();
    addResource(resources, described, "shellCommands", planFile);
    Path jar = peerJar();
    if (jar != null) {
      addResource(resources, described, "AppMaster.jar", jar);
    }

    String cps = ApplicationConstants.CLASS_PATH_SEPARATOR;
    StringBuilder cp = new StringBuilder(ApplicationConstants.Environment.CLASSPATH.$$());
    cp.append(cps).append("./*").append(cps).append(amConfDir);
    for (String e : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
      if (!e.isEmpty()) {
        cp.append(cps).append(e);
      }
    }
    Map<String, String> env = new LinkedHashMap<>();
    env.put(ApplicationConstants.Environment.CLASSPATH.name(), cp.toString());

    List<String> cmd = new ArrayList<>();
    cmd.add(ApplicationConstants.Environment.JAVA_HOME.$$() + "/bin/java");
    cmd.add(ApplicationConstants.JVM_ADD_OPENS_VAR);
    cmd.add("-Xmx" + Math.max(64, amMb * 3 / 4) + "m");
    cmd.add("-Djava.net.preferIPv4Stack=true");
    cmd.add(ShellAm.class.getName());
    cmd.add(amMode);
    cmd.add("--plan");
    cmd.add("shellCommands");
    int failAttempt = Integer.parseInt(o.get("fail_attempt"));
    if (failAttempt > 0) {
      cmd.add("--fail-attempt");
      cmd.add(String.valueOf(failAttempt));
    }
    cmd.add("1>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/AppMaster.stdout");
    cmd.add("2>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/AppMaster.stderr");
    String command = String.join(" ", cmd);

    // The application's ACLs (a value's '+' is the space between users and groups).
    Map<ApplicationAccessType, String> acls = new LinkedHashMap<>();
    if (o.containsKey("acl_view")) {
      acls.put(ApplicationAccessType.VIEW_APP, o.get("acl_view").replace('+', ' '));
    }
    if (o.containsKey("acl_modify")) {
      acls.put(ApplicationAccessType.MODIFY_APP, o.get("acl_modify").replace('+', ' '));
    }
    ContainerLaunchContext am = ContainerLaunchContext.newInstance(resources, env,
        List.of(command), null, null, acls.isEmpty() ? null : acls);
    ctx.setApplicationName(o.get("name"));
    ctx.setApplicationType("HOTPATH-SHELL");
    ctx.setQueue(o.get("queue"));
    ctx.setAMContainerSpec(am);
    ctx.setResource(Resource.newInstance(amMb, 1));
    ctx.setPriority(Priority.newInstance(0));
    ctx.setMaxAppAttempts(conf.getInt(YarnConfiguration.RM_AM_MAX_ATTEMPTS,
        YarnConfiguration.DEFAULT_RM_AM_MAX_ATTEMPTS));
    ctx.setKeepContainersAcrossApplicationAttempts(false);
    client.submitApplication(ctx);
    return Json.obj("app_id", id.toString(), "app_dir", dir.toString(),
        "shared", shared.toString(), "result", plan.getProperty("result"),
        "am_command", command, "am_classpath", cp.toString(), "local_resources", described);
  }

  /** A FILE/APPLICATION resource for a local file: file: URL, exact size and mtime (ms). */
  private static void addResource(Map<String, LocalResource> resources,
      Map<String, Object> described, String name, Path file) {
    java.io.File f = file.toFile();
    URL url = URL.fromPath(new org.apache.hadoop.fs.Path(f.toURI()));
    long size = f.length();
    long mtime = f.lastModified();
    resources.put(name, LocalResource.newInstance(url, LocalResourceType.FILE,
        LocalResourceVisibility.APPLICATION, size, mtime));
    described.put(name, Json.obj("path", f.getAbsolutePath(), "size", size, "timestamp", mtime,
        "type", "FILE", "visibility", "APPLICATION"));
  }

  /** The peer's own jar (target/hotpath-peer-*.jar next to target/classes), if it was built. */
  private static Path peerJar() throws Exception {
    Path code = Paths.get(ShellAm.class.getProtectionDomain().getCodeSource().getLocation()
        .toURI());
    if (Files.isRegularFile(code)) {
      return code;
    }
    Path target = code.getParent();
    if (target == null) {
      return null;
    }
    try (var s = Files.newDirectoryStream(target, "hotpath-peer-*.jar")) {
      for (Path p : s) {
        return p;
      }
    }
    return null;
  }

}
