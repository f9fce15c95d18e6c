package hotpath.mr;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapreduce.Counter;
import org.apache.hadoop.mapreduce.CounterGroup;
import org.apache.hadoop.mapreduce.Counters;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.SleepJob;
import org.apache.hadoop.mapreduce.TaskCompletionEvent;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.map.TokenCounterMapper;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.mapreduce.lib.reduce.IntSumReducer;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;

/**
 * {@code mr-client} (same commands, no RM of its own: jobs go to the RM named by
 * {@code --set yarn.resourcemanager.address=...} and {@code --set
 * yarn.resourcemanager.scheduler.address=...}, e.g. {@code hotpath rm}; see
 * {@link #startClient}), or
 * {@code mr-rm}: a Java ResourceManager set up for MapReduce ({@link MiniMRYarnCluster} with no
 * NodeManagers of its own: the hotpath agents register with its resource tracker) and Hadoop's MR
 * client in the same JVM, so that Hadoop 3.5.0's own jobs run on external NodeManagers.
 *
 * <p>The mini cluster puts {@code yarn.is.minicluster=true} into the job configuration, which
 * makes {@code MRApps} append this JVM's class path to the AM's and tasks' {@code CLASSPATH}: MR
 * runs without a Hadoop install, as long as the NodeManagers share this machine (shuffle.md 8.2).
 *
 * <p>Cluster defaults (each overridable by {@code --set}): {@link #CLUSTER}. Job defaults (each
 * overridable by {@code --set}, and per job by {@code conf.KEY=VALUE}): {@link #JOB}.
 *
 * <p>Commands:
 * <ul>
 *   <li>{@code ping} → {@code {}}
 *   <li>{@code nodes} → {@code nodes} [{{@code node_id}, {@code state}, {@code http_address},
 *       {@code memory_mb}, {@code vcores}}] (the RM context's view)
 *   <li>{@code submit sleep [m=N] [r=N] [mt=MS] [rt=MS] [conf.K=V]...}: Hadoop's {@code SleepJob}
 *       (jobclient tests jar: no input, every map writes one record per reducer through its
 *       partitioner, {@code NullOutputFormat}) → {@code job_id}, {@code app_id}
 *   <li>{@code submit wordcount in=DIR out=DIR [r=N] [conf.K=V]...}: a word count made of
 *       Hadoop's library classes ({@code TokenCounterMapper}, {@code IntSumReducer}, no combiner;
 *       {@code TextInputFormat}: one map per small input file; output lines {@code word\tcount})
 *   <li>{@code wait JOB_ID [TIMEOUT_S]} (300): polls until the job is complete →
 *       {@code timed_out}, then {@link #describe}
 *   <li>{@code status JOB_ID} → {@link #describe} without waiting
 *   <li>{@code am-node JOB_ID} → {@code node_id} of the job's current AM container, or null
 *   <li>{@code kill JOB_ID} → {@code killed}
 * </ul>
 *
 * <p>{@link #describe}: {@code job_id}, {@code state} (JobStatus.State), {@code successful},
 * {@code failure_info}, {@code map_progress}, {@code reduce_progress}, {@code counters}
 * {group name: {counter name: value}}, {@code attempts} [{{@code attempt_id}, {@code map},
 * {@code status}, {@code http} (the node's shuffle address the AM reported)}], and
 * {@code failed_diagnostics} {attempt id: [diagnostics]} for attempts that did not succeed.
 */
final class MrRm implements PeerMode {
  /**
   * RM defaults for running MR on two small external NodeManagers. The AM liveness expiry stays
   * Hadoop's (10 min): an MR AM JVM on a loaded 2-vCPU machine can take over 30 s to register.
   */
  static final Map<String, String> CLUSTER = ordered(
      YarnConfiguration.RM_SCHEDULER,
      "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler",
      YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, "128",
      YarnConfiguration.RM_AM_MAX_ATTEMPTS, "2",
      YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS, "10000",
      YarnConfiguration.CLIENT_NM_CONNECT_MAX_WAIT_MS, "5000",
      YarnConfiguration.CLIENT_NM_CONNECT_RETRY_INTERVAL_MS, "1000",
      // no JobHistoryServer: nothing here reads history, and it costs seconds and ports
      MiniMRYarnCluster.MR_HISTORY_MINICLUSTER_ENABLED, "false",
      "yarn.nodemanager.aux-services", "mapreduce_shuffle");

  /**
   * Job defaults: an AM and tasks small enough that an AM and several tasks fit on a 1 GB node
   * (Hadoop's 1536/1024 MB would need big nodes), reducers only once every map is done (few
   * containers: no reducer holds a slot a map waits for).
   */
  static final Map<String, String> JOB = ordered(
      "yarn.app.mapreduce.am.resource.mb", "512",
      "yarn.app.mapreduce.am.command-opts", "-Xmx384m",
      "mapreduce.map.memory.mb", "256",
      "mapreduce.reduce.memory.mb", "256",
      "mapreduce.map.java.opts", "-Xmx200m",
      "mapreduce.reduce.java.opts", "-Xmx200m",
      "mapreduce.job.reduce.slowstart.completedmaps", "1.0");

  private final List<String[]> sets;
  private final Path workDir;
  /** {@code mr-client}: no RM here; jobs go to the RM the {@code --set}s name. */
  private final boolean external;
  private MiniMRYarnCluster cluster;
  /** The configuration jobs start from (the mini cluster's, or the one built for mr-client). */
  private Configuration clusterConf;
  /** mr-client: the external RM's client, for {@code nodes} and {@code am-node}. */
  private YarnClient yarn;
  private final Map<String, Job> jobs = new HashMap<>();

  MrRm(List<String[]> sets, Path workDir, boolean external) {
    this.sets = sets;
    this.workDir = workDir;
    this.external = external;
  }

  static Map<String, String> ordered(String... kv) {
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i + 1 < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return m;
  }

  @Override
  public void start() throws Exception {
    YarnConfiguration conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", workDir.resolve("tmp").toString());
    conf.set(YarnConfiguration.RM_HOSTNAME, "localhost");
    conf.set(YarnConfiguration.RM_WEBAPP_ADDRESS, "localhost:0");
    conf.set(YarnConfiguration.RM_WEBAPP_HTTPS_ADDRESS, "localhost:0");
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, false);
    conf.setBoolean(YarnConfiguration.TIMELINE_SERVICE_ENABLED, false);
    CLUSTER.forEach(conf::set);
    JOB.forEach(conf::set);
    for (String[] kv : sets) {
      conf.set(kv[0], kv[1]);
    }
    if (external) {
      startClient(conf);
      return;
    }
    // the mini cluster's work dir (staging dir included) is target/<name> under the cwd
    cluster = new MiniMRYarnCluster("hotpath-mr", 0);
    cluster.init(conf);
    cluster.start();
    clusterConf = cluster.getConfig();
  }

  /**
   * mr-client: the job side of what {@link MiniMRYarnCluster} and its {@code MiniYARNCluster}
   * put into the configuration (MapReduce on YARN, a local staging dir created here, umask 000,
   * no uber AM, no JobHistoryServer, and {@code yarn.is.minicluster=true} so that the AM and tasks get this JVM's
   * class path), with the RM's addresses from the {@code --set}s
   * ({@code yarn.resourcemanager.address}, {@code yarn.resourcemanager.scheduler.address}).
   */
  private void startClient(YarnConfiguration conf) throws Exception {
    for (String k : new String[] {YarnConfiguration.RM_ADDRESS,
        YarnConfiguration.RM_SCHEDULER_ADDRESS}) {
      boolean given = false;
      for (String[] kv : sets) {
        given |= kv[0].equals(k);
      }
      if (!given) {
        throw new IllegalArgumentException("mr-client needs --set " + k + "=HOST:PORT");
      }
    }
    conf.set("mapreduce.framework.name", "yarn");
    conf.setBoolean(YarnConfiguration.IS_MINI_YARN_CLUSTER, true);
    conf.set("fs.permissions.umask-mode", "000");
    conf.set("mapreduce.jobtracker.address", "test");
    conf.setBoolean("mapreduce.job.ubertask.enable", false);
    // No JobHistoryServer: an empty address makes the client answer a finished job's status
    // from the RM's report, where the default (0.0.0.0:10020) has it retry a connection to a
    // server that is not there for minutes.
    conf.set("mapreduce.jobhistory.address", "");
    if (conf.get("yarn.app.mapreduce.am.staging-dir", "/tmp/hadoop-yarn/staging")
        .equals("/tmp/hadoop-yarn/staging")) {
      conf.set("yarn.app.mapreduce.am.staging-dir",
          workDir.resolve("apps_staging_dir").toAbsolutePath().toString());
    }
    Files.createDirectories(Path.of(conf.get("yarn.app.mapreduce.am.staging-dir")));
    for (String[] kv : sets) {
      conf.set(kv[0], kv[1]);
    }
    yarn = YarnClient.createYarnClient();
    yarn.init(conf);
    yarn.start();
    clusterConf = conf;
  }

  /** The running cluster's whole configuration (bound ports included) as yarn-site.xml. */
  @Override
  public void writeConf(Path confDir) throws Exception {
    Configuration c = clusterConf;
    TreeMap<String, String> props = new TreeMap<>();
    for (Map.Entry<String, String> e : c) {
      props.put(e.getKey(), c.get(e.getKey()));
    }
    StringBuilder sb = new StringBuilder("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        + "<!-- written by the hotpath MapReduce peer (peers/hadoop-mr) -->\n<configuration>\n");
    for (Map.Entry<String, String> e : props.entrySet()) {
      if (e.getValue() == null) {
        continue;
      }
      sb.append("  <property><name>").append(esc(e.getKey())).append("</name><value>")
          .append(esc(e.getValue())).append("</value></property>\n");
    }
    sb.append("</configuration>\n");
    Files.writeString(confDir.resolve("yarn-site.xml"), sb.toString(), StandardCharsets.UTF_8);
  }

  private static String esc(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }

  @Override
  public Map<String, Object> ready() {
    Configuration c = clusterConf;
    return Json.obj(
        "resource_tracker", c.get(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS),
        "rm_address", c.get(YarnConfiguration.RM_ADDRESS),
        "scheduler", c.get(YarnConfiguration.RM_SCHEDULER_ADDRESS),
        "staging_dir", c.get("yarn.app.mapreduce.am.staging-dir"),
        "aux_services", c.get("yarn.nodemanager.aux-services"),
        "hadoop_version", org.apache.hadoop.util.VersionInfo.getVersion());
  }

  @Override
  public Map<String, Object> command(String name, String[] args) throws Exception {
    switch (name) {
      case "ping":
        return Json.obj();
      case "nodes":
        return nodes();
      case "submit":
        return submit(args);
      case "wait":
        return waitFor(job(args), args.length > 1 ? Long.parseLong(args[1]) : 300);
      case "status":
        return describe(job(args));
      case "am-node":
        return amNode(args);
      case "kill": {
        Job j = job(args);
        j.killJob();
        return Json.obj("killed", j.getJobID().toString());
      }
      default:
        throw new IllegalArgumentException("unknown command " + name
            + " (mr-rm: ping, nodes, submit sleep|wordcount KEY=VALUE..., wait JOB_ID [TIMEOUT_S],"
            + " status JOB_ID, am-node JOB_ID, kill JOB_ID)");
    }
  }

  @Override
  public void close() throws Exception {
    if (yarn != null) {
      yarn.stop();
    }
    if (cluster != null) {
      cluster.stop();
    }
  }

  private Map<String, Object> nodes() throws Exception {
    if (external) {
      List<NodeReport> reports = new ArrayList<>(yarn.getNodeReports());
      reports.sort(Comparator.comparing(n -> n.getNodeId().toString()));
      List<Object> out = new ArrayList<>();
      for (NodeReport n : reports) {
        out.add(Json.obj(
            "node_id", n.getNodeId().toString(),
            "state", n.getNodeState().toString(),
            "http_address", n.getHttpAddress(),
            "memory_mb", n.getCapability().getMemorySize(),
            "vcores", n.getCapability().getVirtualCores()));
      }
      return Json.obj("nodes", out);
    }
    ResourceManager rm = cluster.getResourceManager();
    List<RMNode> sorted = new ArrayList<>(rm.getRMContext().getRMNodes().values());
    sorted.sort(Comparator.comparing(n -> n.getNodeID().toString()));
    List<Object> out = new ArrayList<>();
    for (RMNode n : sorted) {
      NodeId id = n.getNodeID();
      out.add(Json.obj(
          "node_id", id.toString(),
          "state", n.getState().toString(),
          "http_address", n.getHttpAddress(),
          "memory_mb", n.getTotalCapability().getMemorySize(),
          "vcores", n.getTotalCapability().getVirtualCores()));
    }
    return Json.obj("nodes", out);
  }

  private Map<String, Object> amNode(String[] args) throws Exception {
    Job j = job(args);
    org.apache.hadoop.yarn.api.records.ApplicationId app =
        org.apache.hadoop.mapreduce.TypeConverter.toYarn(j.getJobID()).getAppId();
    if (external) {
      var attemptId = yarn.getApplicationReport(app).getCurrentApplicationAttemptId();
      var am = attemptId == null ? null
          : yarn.getApplicationAttemptReport(attemptId).getAMContainerId();
      var node = am == null ? null : yarn.getContainerReport(am).getAssignedNode();
      return Json.obj("node_id", node == null ? null : node.toString());
    }
    var rmApp = cluster.getResourceManager().getRMContext().getRMApps().get(app);
    var attempt = rmApp == null ? null : rmApp.getCurrentAppAttempt();
    var master = attempt == null ? null : attempt.getMasterContainer();
    return Json.obj("node_id", master == null ? null : master.getNodeId().toString());
  }

  private Job job(String[] args) {
    if (args.length < 1) {
      throw new IllegalArgumentException("a job id is required");
    }
    Job j = jobs.get(args[0]);
    if (j == null) {
      throw new IllegalArgumentException("no job " + args[0] + " was submitted here");
    }
    return j;
  }

  private Map<String, Object> submit(String[] args) throws Exception {
    if (args.length < 1) {
      throw new IllegalArgumentException("submit sleep|wordcount KEY=VALUE...");
    }
    Map<String, String> kv = new LinkedHashMap<>();
    JobConf conf = new JobConf(clusterConf);
    for (int i = 1; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("expected KEY=VALUE, got " + args[i]);
      }
      String k = args[i].substring(0, eq);
      String v = args[i].substring(eq + 1);
      if (k.startsWith("conf.")) {
        conf.set(k.substring(5), v);
      } else {
        kv.put(k, v);
      }
    }
    Job job;
    switch (args[0]) {
      case "sleep" -> {
        SleepJob sleep = new SleepJob();
        sleep.setConf(conf);
        job = sleep.createJob(intArg(kv, "m", 2), intArg(kv, "r", 0), intArg(kv, "mt", 100), 1,
            intArg(kv, "rt", 100), 1);
      }
      case "wordcount" -> {
        job = Job.getInstance(conf, "hotpath wordcount");
        // job.jar = the MR core jar: the AM localizes it as a PATTERN resource
        job.setJarByClass(TokenCounterMapper.class);
        job.setMapperClass(TokenCounterMapper.class);
        job.setReducerClass(IntSumReducer.class);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(IntWritable.class);
        job.setNumReduceTasks(intArg(kv, "r", 2));
        FileInputFormat.addInputPath(job, new org.apache.hadoop.fs.Path(required(kv, "in")));
        FileOutputFormat.setOutputPath(job, new org.apache.hadoop.fs.Path(required(kv, "out")));
      }
      default -> throw new IllegalArgumentException("unknown job " + args[0]
          + " (sleep, wordcount)");
    }
    for (String k : kv.keySet()) {
      if (!List.of("m", "r", "mt", "rt", "in", "out").contains(k)) {
        throw new IllegalArgumentException("unknown job argument " + k);
      }
    }
    job.submit();
    String id = job.getJobID().toString();
    jobs.put(id, job);
    return Json.obj("job_id", id, "app_id", id.replaceFirst("^job_", "application_"));
  }

  private static int intArg(Map<String, String> kv, String k, int dflt) {
    String v = kv.get(k);
    return v == null ? dflt : Integer.parseInt(v);
  }

  private static String required(Map<String, String> kv, String k) {
    String v = kv.get(k);
    if (v == null) {
      throw new IllegalArgumentException(k + "= is required");
    }
    return v;
  }

  private Map<String, Object> waitFor(Job job, long timeoutS) throws Exception {
    long deadline = System.nanoTime() + timeoutS * 1_000_000_000L;
    boolean timedOut = false;
    while (!job.isComplete()) {
      if (System.nanoTime() > deadline) {
        timedOut = true;
        break;
      }
      Thread.sleep(200);
    }
    Map<String, Object> m = Json.obj("timed_out", timedOut);
    m.putAll(describe(job));
    return m;
  }

  private static Map<String, Object> describe(Job job) throws Exception {
    JobStatus st = job.getStatus();
    Map<String, Object> m = Json.obj(
        "job_id", job.getJobID().toString(),
        "state", st.getState().toString(),
        "successful", st.getState() == JobStatus.State.SUCCEEDED,
        "failure_info", st.getFailureInfo(),
        "map_progress", (double) st.getMapProgress(),
        "reduce_progress", (double) st.getReduceProgress());
    Map<String, Object> counters = new TreeMap<>();
    Counters cs = job.getCounters();
    if (cs != null) {
      for (CounterGroup g : cs) {
        Map<String, Object> group = new TreeMap<>();
        for (Counter c : g) {
          group.put(c.getName(), c.getValue());
        }
        counters.put(g.getName(), group);
      }
    }
    m.put("counters", counters);
    List<Object> attempts = new ArrayList<>();
    Map<String, Object> failed = new TreeMap<>();
    int from = 0;
    while (true) {
      TaskCompletionEvent[] events = job.getTaskCompletionEvents(from, 1000);
      if (events.length == 0) {
        break;
      }
      from += events.length;
      for (TaskCompletionEvent e : events) {
        attempts.add(Json.obj(
            "attempt_id", e.getTaskAttemptId().toString(),
            "map", e.isMapTask(),
            "status", e.getStatus().toString(),
            "http", e.getTaskTrackerHttp()));
        if (e.getStatus() != TaskCompletionEvent.Status.SUCCEEDED) {
          String[] d = job.getTaskDiagnostics(e.getTaskAttemptId());
          failed.put(e.getTaskAttemptId().toString(), d == null ? List.of() : List.of(d));
        }
      }
    }
    m.put("attempts", attempts);
    m.put("failed_diagnostics", failed);
    return m;
  }
}
