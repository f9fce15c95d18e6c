package hotpath.peer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerExitStatus;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.api.records.UpdatedContainer;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.client.api.async.AMRMClientAsync;
import org.apache.hadoop.yarn.client.api.async.NMClientAsync;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * A DistributedShell-like ApplicationMaster (our own code): {@code ShellAm MODE --plan FILE
 * [--key value]...}, MODE {@code shell} or {@code bench}.
 *
 * <p>How it fits together: {@link YarnRmMode}'s {@code app-submit} writes the plan (a properties
 * file, localized into the AM's work dir as {@code shellCommands}) and starts this class as the AM
 * container's command; command-line options override plan keys. The AM reads its RM address from
 * the {@code yarn-site.xml} on its classpath, registers through {@link AMRMClientAsync}, asks for
 * containers, starts them (shell: {@link NMClientAsync} with one {@code getContainerStatuses} after
 * each start, as DistributedShell does; bench: synchronous {@link NMClient#startContainer} in worker
 * threads, at most {@code per-node} containers at a time per node, each start RPC timed), collects
 * every completion the RM reports, writes the result JSON, stops its NM client (which stops every
 * container it started), unregisters and exits 0.
 *
 * <p>Plan keys: {@code containers} (N), {@code container-mb}, {@code container-vcores},
 * {@code exit} ({@code I:CODE,...}: container index I runs {@code exit CODE}), {@code stop}
 * ({@code I,...}: index I runs {@code sleep 600} and is stopped by the AM once its process runs,
 * expected status −105), {@code result} (result file), {@code shared-dir} (a directory every
 * container can write: markers and timestamps), {@code fail-attempt} (attempts up to this number
 * exit 3 at once), {@code sleep} ({@code I:SECS,...}: index I sleeps SECS before its exit),
 * {@code hold} ({@code I,...}: index I runs {@code sleep 600} in the background of its shell and
 * waits for it, touching {@code held-CID} in the shared dir once started; nothing but the RM's
 * cleanup ends it), {@code release} ({@code I,...}: as hold, and the AM releases the running
 * container through the RM once its marker exists: expected status −100 from the RM, no
 * replacement; its completion waits for the NM's own final status, recorded as
 * {@code nm_state}, {@code nm_exit_status}, {@code nm_diagnostics}), {@code bad-resource} ({@code I:missing|stale,...}: index I's launch context names
 * a local resource {@code bad.txt} that does not exist, or whose timestamp is 1 ms off the file's;
 * expected status −1000),
 * {@code per-node} (bench), {@code heartbeat-ms}, {@code timeout-s}, {@code rm-retry-ms}
 * ({@code yarn.resourcemanager.connect.retry-interval.ms}), {@code nm-proxies}
 * ({@code yarn.client.max-cached-nodemanagers-proxies}, Hadoop's default 0).
 *
 * <p>Result file (one JSON object, rewritten atomically; the second write adds
 * {@code nm_client_stop_ms}). Shell: {@code mode}, {@code app_attempt_id}, {@code attempt},
 * {@code final_status} (SUCCEEDED iff nothing unexpected), {@code containers_planned},
 * {@code allocated}, {@code released_extra}, {@code surplus_completed}, {@code replacements}
 * (ABORTED completions that got a new container), {@code unexpected} [text], {@code errors}
 * [{{@code call}, {@code container_id}, {@code node_id}, {@code error}}], {@code launches}
 * [{{@code index}, {@code container_id}, {@code node_id}, {@code started}, {@code start_error}}],
 * {@code completions} [{{@code index}, {@code container_id}, {@code node_id}, {@code state},
 * {@code exit_status}, {@code expected_exit_status}, {@code diagnostics}, {@code replacement},
 * {@code start_ms}, {@code start_error}, {@code start_status_state},
 * {@code start_status_sub_state}, {@code stop_requested}, {@code stop_acknowledged},
 * {@code stop_error}}] in the order the RM reported them, {@code elapsed_ms}. Bench: {@code mode},
 * {@code app_attempt_id}, {@code attempt}, {@code final_status}, {@code containers_planned},
 * {@code per_node}, {@code started_per_node}, {@code max_running_per_node}, {@code exit_statuses}
 * {status: count}, {@code start_rpc_ms} and {@code start_to_running_ms} ({@code count},
 * {@code p50}, {@code p99}, {@code min}, {@code max}; nearest rank), {@code wall_ms} (first start
 * call to last completion), {@code wall_to_last_timestamp_ms}, {@code wall_from_request_ms},
 * {@code unexpected}, {@code errors}, {@code elapsed_ms}.
 */
public final class ShellAm {
  /** Exit code of an attempt told to fail by {@code fail-attempt}. */
  static final int FAIL_ATTEMPT_EXIT = 3;

  private final String mode;
  private final Map<String, String> opts;
  private final int containers;
  private final Map<Integer, Integer> exitCodes = new HashMap<>();
  private final Set<Integer> stopped = new HashSet<>();
  private final Map<Integer, Integer> sleeps = new HashMap<>();
  private final Set<Integer> held = new HashSet<>();
  private final Set<Integer> released = new HashSet<>();
  private final Map<Integer, String> badResources = new HashMap<>();
  private final Path result;
  private final Path shared;
  private final Resource capability;
  private final long t0 = System.nanoTime();

  private ApplicationAttemptId attemptId;
  private AMRMClientAsync<ContainerRequest> rm;
  private NMClientAsync nmAsync;
  private NMClient nmSync;

  // all of the below guarded by `this`
  private final Deque<Integer> pending = new ArrayDeque<>();
  private final Deque<ContainerRequest> requests = new ArrayDeque<>();
  private final Map<ContainerId, Launch> launches = new LinkedHashMap<>();
  private final List<Map<String, Object>> completions = new ArrayList<>();
  private final Map<Integer, Integer> finalStatus = new HashMap<>();
  private final List<String> unexpected = new ArrayList<>();
  private final List<Map<String, Object>> errors = new ArrayList<>();
  private int allocated;
  private int releasedExtra;
  private int surplusCompleted;
  private int replacements;
  private final CountDownLatch done = new CountDownLatch(1);

  // bench only, guarded by `this`
  private final Map<String, Deque<Launch>> queued = new LinkedHashMap<>();
  private final Map<String, Integer> running = new HashMap<>();
  private final Map<String, Integer> perNodeStarted = new LinkedHashMap<>();
  private final Map<String, Integer> maxRunning = new LinkedHashMap<>();
  private long firstStartNanos = -1;
  private long lastCompletionNanos = -1;
  private ExecutorService starters;

  /** One container the AM was given: its index in the plan and what happened to its start. */
  private static final class Launch {
    final int index;
    final Container container;
    final boolean replacement;
    long startCallNanos = -1;
    long startCallEpochNanos = -1;
    long startedNanos = -1;
    String startError;
    String startStatusState;
    String startStatusSubState;
    boolean stopRequested;
    String stopError;
    boolean stopAcknowledged;
    /** Bench: holds one of its node's per-node slots (from dispatch to completion or failure). */
    boolean holdsSlot;

    Launch(int index, Container container, boolean replacement) {
      this.index = index;
      this.container = container;
      this.replacement = replacement;
    }

    String node() {
      return container.getNodeId().toString();
    }
  }

  private ShellAm(String mode, Map<String, String> opts) {
    this.mode = mode;
    this.opts = opts;
    this.containers = Integer.parseInt(opt("containers", "1"));
    if (containers < 0 || containers > 100_000) {
      throw new IllegalArgumentException("containers out of range: " + containers);
    }
    for (String part : opt("exit", "").split(",")) {
      if (part.isBlank()) {
        continue;
      }
      String[] iv = part.split(":", 2);
      if (iv.length != 2) {
        throw new IllegalArgumentException("exit wants I:CODE,..., got " + part);
      }
      exitCodes.put(Integer.parseInt(iv[0].trim()), Integer.parseInt(iv[1].trim()));
    }
    for (String part : opt("sleep", "").split(",")) {
      if (part.isBlank()) {
        continue;
      }
      String[] iv = part.split(":", 2);
      if (iv.length != 2) {
        throw new IllegalArgumentException("sleep wants I:SECS,..., got " + part);
      }
      sleeps.put(Integer.parseInt(iv[0].trim()), Integer.parseInt(iv[1].trim()));
    }
    for (String part : opt("stop", "").split(",")) {
      if (!part.isBlank()) {
        stopped.add(Integer.parseInt(part.trim()));
      }
    }
    for (String part : opt("hold", "").split(",")) {
      if (!part.isBlank()) {
        held.add(Integer.parseInt(part.trim()));
      }
    }
    for (String part : opt("release", "").split(",")) {
      if (!part.isBlank()) {
        released.add(Integer.parseInt(part.trim()));
      }
    }
    for (String part : opt("bad-resource", "").split(",")) {
      if (part.isBlank()) {
        continue;
      }
      String[] iv = part.split(":", 2);
      if (iv.length != 2 || !(iv[1].trim().equals("missing") || iv[1].trim().equals("stale"))) {
        throw new IllegalArgumentException("bad-resource wants I:missing|stale,..., got " + part);
      }
      badResources.put(Integer.parseInt(iv[0].trim()), iv[1].trim());
    }
    this.result = Paths.get(require("result")).toAbsolutePath();
    String sh = opts.get("shared-dir");
    this.shared = sh == null ? null : Paths.get(sh).toAbsolutePath();
    if (shared != null && shared.toString().contains("'")) {
      throw new IllegalArgumentException("shared-dir must not contain a quote: " + shared);
    }
    if (shared == null && (!stopped.isEmpty() || !held.isEmpty() || !released.isEmpty()
        || !badResources.isEmpty() || mode.equals("bench"))) {
      throw new IllegalArgumentException(
          "shared-dir is required for stop, hold, release, bad-resource and bench");
    }
    this.capability = Resource.newInstance(Long.parseLong(opt("container-mb", "128")),
        Integer.parseInt(opt("container-vcores", "1")));
  }

  private String opt(String k, String dflt) {
    return opts.getOrDefault(k, dflt);
  }

  private String require(String k) {
    String v = opts.get(k);
    if (v == null) {
      throw new IllegalArgumentException(k + " is required (plan or --" + k + ")");
    }
    return v;
  }

  public static void main(String[] argv) {
    int code;
    try {
      code = run(argv);
    } catch (Throwable t) {
      System.err.println("ShellAm: failed");
      t.printStackTrace(System.err);
      code = 1;
    }
    System.err.println("ShellAm: exit " + code);
    System.err.flush();
    System.exit(code);
  }

  private static int run(String[] argv) throws Exception {
    if (argv.length < 1 || !(argv[0].equals("shell") || argv[0].equals("bench"))) {
      throw new IllegalArgumentException("usage: ShellAm shell|bench --plan FILE [--key value]...");
    }
    Map<String, String> opts = new HashMap<>();
    Map<String, String> cli = new HashMap<>();
    for (int i = 1; i < argv.length; i += 2) {
      if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
        throw new IllegalArgumentException("bad option near " + argv[i]);
      }
      cli.put(argv[i].substring(2), argv[i + 1]);
    }
    String plan = cli.get("plan");
    if (plan != null) {
      Properties p = new Properties();
      try (var in = Files.newBufferedReader(Paths.get(plan), StandardCharsets.UTF_8)) {
        p.load(in);
      }
      for (String k : p.stringPropertyNames()) {
        opts.put(k, p.getProperty(k));
      }
    }
    opts.putAll(cli);
    return new ShellAm(argv[0], opts).go();
  }

  private int go() throws Exception {
    String cid = System.getenv(ApplicationConstants.Environment.CONTAINER_ID.name());
    if (cid == null) {
      throw new IllegalStateException("CONTAINER_ID is not set: not started as an AM container");
    }
    attemptId = ContainerId.fromString(cid).getApplicationAttemptId();
    int attempt = attemptId.getAttemptId();
    int failUpTo = Integer.parseInt(opt("fail-attempt", "0"));
    System.err.println("ShellAm: " + mode + " attempt " + attemptId + " container " + cid
        + " options " + opts);
    if (attempt <= failUpTo) {
      System.err.println("ShellAm: attempt " + attempt + " fails on purpose (fail-attempt "
          + failUpTo + ")");
      return FAIL_ATTEMPT_EXIT;
    }

    Configuration conf = new YarnConfiguration();
    // Hadoop's default 0 opens a new connection (and SASL handshake) for every NM call;
    // N > 0 lets NMClient keep up to N node proxies, and their connections, open.
    conf.setInt(YarnConfiguration.NM_CLIENT_MAX_NM_PROXIES,
        Integer.parseInt(opt("nm-proxies", "0")));
    // While the RM restarts, its proxy retries at this interval (Hadoop's default 30 s).
    String rmRetry = opt("rm-retry-ms", "");
    if (!rmRetry.isEmpty()) {
      conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS,
          Long.parseLong(rmRetry));
    }
    String sched = conf.get(YarnConfiguration.RM_SCHEDULER_ADDRESS);
    System.err.println("ShellAm: scheduler address " + sched);
    if (sched == null || sched.equals(YarnConfiguration.DEFAULT_RM_SCHEDULER_ADDRESS)
        || sched.endsWith(":0")) {
      throw new IllegalStateException("no usable " + YarnConfiguration.RM_SCHEDULER_ADDRESS
          + " on the classpath (got " + sched + ")");
    }
    int heartbeat = Integer.parseInt(opt("heartbeat-ms", "200"));
    rm = AMRMClientAsync.createAMRMClientAsync(heartbeat, new RmHandler());
    rm.init(conf);
    rm.start();
    boolean bench = mode.equals("bench");
    if (bench) {
      nmSync = NMClient.createNMClient();
      nmSync.init(conf);
      nmSync.start();
      starters = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "bench-start");
        t.setDaemon(true);
        return t;
      });
    } else {
      nmAsync = NMClientAsync.createNMClientAsync(new NmHandler());
      nmAsync.init(conf);
      nmAsync.start();
    }
    String host = System.getenv(ApplicationConstants.Environment.NM_HOST.name());
    rm.registerApplicationMaster(host == null ? "" : host, 0, "");
    long requestedAt = System.nanoTime();
    synchronized (this) {
      for (int i = 0; i < containers; i++) {
        pending.add(i);
        request();
      }
      if (containers == 0) {
        done.countDown();
      }
    }
    long timeout = Long.parseLong(opt("timeout-s", "300"));
    if (!done.await(timeout, TimeUnit.SECONDS)) {
      synchronized (this) {
        unexpected.add("timed out after " + timeout + " s with " + finalStatus.size() + " of "
            + containers + " containers finished");
      }
    }
    // A stopped container's completion can reach the AM (through the RM) before
    // NMClientAsync's stop callback does: wait for the callbacks (bounded) so that the result
    // records whether each stop was acknowledged.
    long stopDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (System.nanoTime() < stopDeadline) {
      boolean waiting = false;
      synchronized (this) {
        for (Launch l : launches.values()) {
          if (l.stopRequested && !l.stopAcknowledged && l.stopError == null) {
            waiting = true;
            break;
          }
        }
      }
      if (!waiting) {
        break;
      }
      Thread.sleep(20);
    }
    FinalApplicationStatus status;
    synchronized (this) {
      status = unexpected.isEmpty() ? FinalApplicationStatus.SUCCEEDED
          : FinalApplicationStatus.FAILED;
    }
    Map<String, Object> out = bench ? benchResult(requestedAt, status) : shellResult(status);
    writeResult(out);
    // as DistributedShell: stopping the NM client stops every container it ever started
    long s0 = System.nanoTime();
    if (nmAsync != null) {
      nmAsync.stop();
    }
    if (nmSync != null) {
      nmSync.stop();
    }
    out.put("nm_client_stop_ms", ms(System.nanoTime() - s0));
    writeResult(out);
    String msg;
    synchronized (this) {
      msg = unexpected.isEmpty() ? "all " + containers + " containers as planned"
          : String.join("; ", unexpected);
    }
    rm.unregisterApplicationMaster(status, msg.length() > 4000 ? msg.substring(0, 4000) : msg,
        null);
    rm.stop();
    if (starters != null) {
      starters.shutdownNow();
    }
    System.err.println("ShellAm: unregistered " + status + ": " + msg);
    return 0;
  }

  /** Caller holds the lock. */
  private void request() {
    ContainerRequest r = new ContainerRequest(capability, null, null, Priority.newInstance(0));
    requests.add(r);
    rm.addContainerRequest(r);
  }

  private int expected(int index) {
    if (stopped.contains(index)) {
      return ContainerExitStatus.KILLED_BY_APPMASTER;
    }
    if (released.contains(index)) {
      return ContainerExitStatus.ABORTED;
    }
    if (badResources.containsKey(index)) {
      return ContainerExitStatus.INVALID;
    }
    return exitCodes.getOrDefault(index, 0);
  }

  private String command(Launch l) {
    String inner;
    String cid = l.container.getId().toString();
    if (mode.equals("bench")) {
      String ts = shared.resolve(cid + ".ts").toString();
      inner = "date +%s%N > " + ts + ".tmp && mv " + ts + ".tmp " + ts;
    } else if (stopped.contains(l.index)) {
      inner = "echo hello-" + l.index + "; touch " + shared.resolve("running-" + cid)
          + "; exec sleep 600";
    } else if (held.contains(l.index) || released.contains(l.index)) {
      // a shell with a child: the NM must kill the whole process group
      inner = "echo hello-" + l.index + "; sleep 600 & touch " + shared.resolve("held-" + cid)
          + "; wait";
    } else {
      Integer secs = sleeps.get(l.index);
      inner = "echo hello-" + l.index + (secs == null ? "" : "; sleep " + secs) + "; exit "
          + exitCodes.getOrDefault(l.index, 0);
    }
    return "bash -c '" + inner + "' 1>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/stdout 2>"
        + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/stderr";
  }

  private ContainerLaunchContext context(Launch l) {
    Map<String, String> env = new HashMap<>();
    env.put("HOTPATH_SHELL_INDEX", String.valueOf(l.index));
    Map<String, LocalResource> resources = Collections.emptyMap();
    String bad = badResources.get(l.index);
    if (bad != null) {
      resources = Map.of("bad.txt", badResource(l, bad));
    }
    return ContainerLaunchContext.newInstance(resources, env, List.of(command(l)), null, null,
        null);
  }

  /** {@code bad-resource}: a FILE/APPLICATION resource the NM cannot localize. */
  private LocalResource badResource(Launch l, String kind) {
    Path f = shared.resolve("bad-" + l.container.getId() + ".txt");
    long timestamp = 1_000_000L;
    try {
      if (kind.equals("stale")) {
        Files.writeString(f, "stale\n", StandardCharsets.UTF_8);
        timestamp = Files.getLastModifiedTime(f).toMillis() - 1;
      } else {
        Files.deleteIfExists(f);
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    URL url = URL.fromPath(new org.apache.hadoop.fs.Path(f.toUri()));
    return LocalResource.newInstance(url, LocalResourceType.FILE,
        LocalResourceVisibility.APPLICATION, 6, timestamp);
  }

  private final class RmHandler extends AMRMClientAsync.AbstractCallbackHandler {
    @Override
    public void onContainersAllocated(List<Container> list) {
      List<Launch> toStart = new ArrayList<>();
      synchronized (ShellAm.this) {
        for (Container c : list) {
          allocated++;
          Integer idx = pending.poll();
          if (idx == null) {
            releasedExtra++;
            rm.releaseAssignedContainer(c.getId());
            continue;
          }
          ContainerRequest r = requests.poll();
          if (r != null) {
            rm.removeContainerRequest(r);
          }
          boolean again = false;
          for (Launch old : launches.values()) {
            again |= old.index == idx;
          }
          Launch l = new Launch(idx, c, again);
          launches.put(c.getId(), l);
          if (nmSync != null) {
            queued.computeIfAbsent(l.node(), k -> new ArrayDeque<>()).add(l);
          } else {
            toStart.add(l);
          }
        }
        if (nmSync != null) {
          dispatchBench();
        }
      }
      for (Launch l : toStart) {
        synchronized (ShellAm.this) {
          l.startCallNanos = System.nanoTime();
          l.startCallEpochNanos = epochNanos();
        }
        nmAsync.startContainerAsync(l.container, context(l));
      }
    }

    @Override
    public void onContainersCompleted(List<ContainerStatus> statuses) {
      synchronized (ShellAm.this) {
        for (ContainerStatus s : statuses) {
          Launch l = launches.get(s.getContainerId());
          if (l == null) {
            // a released surplus container
            surplusCompleted++;
            continue;
          }
          Map<String, Object> m = Json.obj(
              "index", l.index,
              "container_id", s.getContainerId().toString(),
              "node_id", l.node(),
              "state", s.getState().toString(),
              "exit_status", s.getExitStatus(),
              "expected_exit_status", expected(l.index),
              "diagnostics", s.getDiagnostics(),
              "replacement", l.replacement,
              "start_ms", l.startedNanos < 0 ? null
                  : ms(l.startedNanos - l.startCallNanos),
              "start_error", l.startError,
              "start_status_state", l.startStatusState,
              "start_status_sub_state", l.startStatusSubState,
              "stop_requested", l.stopRequested,
              "stop_acknowledged", l.stopAcknowledged,
              "stop_error", l.stopError);
          completions.add(m);
          if (l.holdsSlot) {
            l.holdsSlot = false;
            running.merge(l.node(), -1, Integer::sum);
            lastCompletionNanos = System.nanoTime();
          }
          if (finalStatus.containsKey(l.index)) {
            continue;
          }
          if (released.contains(l.index) && !finalStatus.containsKey(l.index)) {
            // The RM answered the release; the NM kills the container when the RM's
            // containers_to_cleanup reaches it. Wait for the NM's own final status (the NM
            // client's stop at the AM's end would otherwise race that cleanup).
            Thread t = new Thread(() -> awaitNmCompletion(l, m, s), "nm-status-" + l.index);
            t.setDaemon(true);
            t.start();
            continue;
          }
          if (s.getExitStatus() == ContainerExitStatus.ABORTED) {
            // lost with its node or aborted by the RM: as DistributedShell, ask for another one
            replacements++;
            pending.add(l.index);
            request();
            continue;
          }
          finish(l.index, s.getExitStatus(), s.getContainerId() + " on " + l.node() + ": "
              + s.getDiagnostics());
        }
        if (nmSync != null) {
          dispatchBench();
        }
      }
    }

    @Override
    public void onContainersUpdated(List<UpdatedContainer> containers) {}

    @Override
    public void onShutdownRequest() {
      synchronized (ShellAm.this) {
        unexpected.add("the RM asked the AM to shut down");
      }
      done.countDown();
    }

    @Override
    public void onNodesUpdated(List<NodeReport> updatedNodes) {}

    @Override
    public float getProgress() {
      synchronized (ShellAm.this) {
        return containers == 0 ? 1f : (float) finalStatus.size() / containers;
      }
    }

    @Override
    public void onError(Throwable e) {
      System.err.println("ShellAm: AMRM client error");
      e.printStackTrace(System.err);
      synchronized (ShellAm.this) {
        unexpected.add("AMRM client error: " + e);
      }
      done.countDown();
    }
  }

  /** Records index's final status; caller holds the lock. */
  private void finish(int index, int status, String what) {
    finalStatus.put(index, status);
    if (status != expected(index)) {
      unexpected.add("container " + index + " exit status " + status + ", expected "
          + expected(index) + " (" + what + ")");
    }
    if (finalStatus.size() == containers) {
      done.countDown();
    }
  }

  private final class NmHandler extends NMClientAsync.AbstractCallbackHandler {
    @Override
    public void onContainerStarted(ContainerId id, Map<String, java.nio.ByteBuffer> meta) {
      Launch l;
      synchronized (ShellAm.this) {
        l = launches.get(id);
        l.startedNanos = System.nanoTime();
      }
      // as DistributedShell: one status query right after the start
      nmAsync.getContainerStatusAsync(id, l.container.getNodeId());
      if (stopped.contains(l.index)) {
        Thread t = new Thread(() -> stopWhenRunning(l), "stop-" + id);
        t.setDaemon(true);
        t.start();
      }
      if (released.contains(l.index)) {
        Thread t = new Thread(() -> releaseWhenRunning(l), "release-" + id);
        t.setDaemon(true);
        t.start();
      }
    }

    @Override
    public void onContainerStatusReceived(ContainerId id, ContainerStatus status) {
      synchronized (ShellAm.this) {
        Launch l = launches.get(id);
        if (l != null && l.startStatusState == null) {
          l.startStatusState = status.getState().toString();
          l.startStatusSubState = status.getContainerSubState() == null ? null
              : status.getContainerSubState().toString();
        }
      }
    }

    @Override
    public void onContainerStopped(ContainerId id) {
      synchronized (ShellAm.this) {
        Launch l = launches.get(id);
        if (l != null) {
          l.stopAcknowledged = true;
        }
      }
    }

    @Override
    public void onStartContainerError(ContainerId id, Throwable t) {
      System.err.println("ShellAm: start of " + id + " failed");
      t.printStackTrace(System.err);
      synchronized (ShellAm.this) {
        Launch l = launches.get(id);
        l.startError = Launcher.describe(Launcher.unwrap(t));
        errors.add(Json.obj("call", "startContainers", "container_id", id.toString(),
            "node_id", l.node(), "error", l.startError));
        rm.releaseAssignedContainer(id);
        finish(l.index, Integer.MIN_VALUE, "start failed: " + l.startError);
      }
    }

    @Override
    public void onContainerResourceIncreased(ContainerId id, Resource resource) {}

    @Override
    public void onContainerResourceUpdated(ContainerId id, Resource resource) {}

    @Override
    public void onGetContainerStatusError(ContainerId id, Throwable t) {
      String e = Launcher.describe(Launcher.unwrap(t));
      synchronized (ShellAm.this) {
        Launch l = launches.get(id);
        // A container that finished, and whose completion the RM already acknowledged, is
        // answered with "was recently stopped" (Java's NM and ours alike): that is an answer
        // about a finished container, not a failed query.
        if (l != null && e.contains("was recently stopped on node manager")) {
          if (l.startStatusState == null) {
            l.startStatusState = "RECENTLY_STOPPED";
          }
          return;
        }
        // As DistributedShell: recorded, not fatal (the query races the node's death when a
        // node is lost; the container's fate comes from the RM). Tests check `errors`.
        errors.add(Json.obj("call", "getContainerStatuses", "container_id", id.toString(),
            "error", e));
      }
    }

    @Override
    public void onIncreaseContainerResourceError(ContainerId id, Throwable t) {}

    @Override
    public void onUpdateContainerResourceError(ContainerId id, Throwable t) {}

    @Override
    public void onStopContainerError(ContainerId id, Throwable t) {
      synchronized (ShellAm.this) {
        Launch l = launches.get(id);
        String e = Launcher.describe(Launcher.unwrap(t));
        if (l != null) {
          l.stopError = e;
        }
        errors.add(Json.obj("call", "stopContainers", "container_id", id.toString(), "error", e));
        unexpected.add("stopContainers of " + id + " failed: " + e);
      }
    }
  }

  /** Waits for the container's marker file (its process runs), then stops it through the NM. */
  private void stopWhenRunning(Launch l) {
    Path marker = shared.resolve("running-" + l.container.getId());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (!Files.exists(marker)) {
      if (System.nanoTime() > deadline) {
        synchronized (this) {
          unexpected.add("container " + l.container.getId() + " never ran (no " + marker + ")");
        }
        break;
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        return;
      }
    }
    synchronized (this) {
      l.stopRequested = true;
    }
    nmAsync.stopContainerAsync(l.container.getId(), l.container.getNodeId());
  }

  /** Waits for the container's marker file (its shell runs), then releases it through the RM. */
  private void releaseWhenRunning(Launch l) {
    Path marker = shared.resolve("held-" + l.container.getId());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (!Files.exists(marker)) {
      if (System.nanoTime() > deadline) {
        synchronized (this) {
          unexpected.add("container " + l.container.getId() + " never ran (no " + marker + ")");
        }
        return;
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        return;
      }
    }
    rm.releaseAssignedContainer(l.container.getId());
  }

  /**
   * A released container: polls the NM's {@code getContainerStatuses} until it reports the
   * container COMPLETE (or recently stopped), records {@code nm_state}, {@code nm_exit_status}
   * and {@code nm_diagnostics} in its completion, then finishes it with the RM's status.
   */
  private void awaitNmCompletion(Launch l, Map<String, Object> m, ContainerStatus fromRm) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    String state = null;
    Integer exit = null;
    String diag = null;
    while (System.nanoTime() < deadline) {
      try {
        ContainerStatus st = nmAsync.getClient().getContainerStatus(l.container.getId(),
            l.container.getNodeId());
        if (st.getState() == org.apache.hadoop.yarn.api.records.ContainerState.COMPLETE) {
          state = "COMPLETE";
          exit = st.getExitStatus();
          diag = st.getDiagnostics();
          break;
        }
      } catch (Exception e) {
        String text = Launcher.describe(Launcher.unwrap(e));
        if (text.contains("was recently stopped on node manager")) {
          state = "RECENTLY_STOPPED";
          break;
        }
        synchronized (this) {
          errors.add(Json.obj("call", "getContainerStatuses", "container_id",
              l.container.getId().toString(), "error", text));
        }
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        return;
      }
    }
    synchronized (this) {
      m.put("nm_state", state);
      m.put("nm_exit_status", exit);
      m.put("nm_diagnostics", diag);
      if (state == null) {
        unexpected.add("the NM never reported released container " + l.container.getId()
            + " complete");
      }
      finish(l.index, fromRm.getExitStatus(), l.container.getId() + " on " + l.node() + ": "
          + fromRm.getDiagnostics());
    }
  }

  /** Bench: starts queued containers while their node has a free slot; caller holds the lock. */
  private void dispatchBench() {
    int perNode = Integer.parseInt(opt("per-node", "4"));
    for (Map.Entry<String, Deque<Launch>> e : queued.entrySet()) {
      String node = e.getKey();
      while (!e.getValue().isEmpty() && running.getOrDefault(node, 0) < perNode) {
        Launch l = e.getValue().poll();
        int now = running.merge(node, 1, Integer::sum);
        maxRunning.merge(node, now, Math::max);
        l.holdsSlot = true;
        perNodeStarted.merge(node, 1, Integer::sum);
        starters.execute(() -> benchStart(l));
      }
    }
  }

  private void benchStart(Launch l) {
    ContainerLaunchContext ctx = context(l);
    long wall = epochNanos();
    long t = System.nanoTime();
    synchronized (this) {
      if (firstStartNanos < 0) {
        firstStartNanos = t;
      }
    }
    String err = null;
    try {
      nmSync.startContainer(l.container, ctx);
    } catch (Throwable e) {
      err = Launcher.describe(Launcher.unwrap(e));
      System.err.println("ShellAm: bench start of " + l.container.getId() + " failed");
      e.printStackTrace(System.err);
    }
    long end = System.nanoTime();
    synchronized (this) {
      l.startCallNanos = t;
      l.startCallEpochNanos = wall;
      l.startedNanos = end;
      if (err != null) {
        l.startError = err;
        errors.add(Json.obj("call", "startContainers", "container_id",
            l.container.getId().toString(), "node_id", l.node(), "error", err));
        if (l.holdsSlot) {
          l.holdsSlot = false;
          running.merge(l.node(), -1, Integer::sum);
        }
        rm.releaseAssignedContainer(l.container.getId());
        finish(l.index, Integer.MIN_VALUE, "start failed: " + err);
        dispatchBench();
      }
    }
  }

  private Map<String, Object> shellResult(FinalApplicationStatus status) {
    synchronized (this) {
      List<Object> started = new ArrayList<>();
      for (Launch l : launches.values()) {
        started.add(Json.obj("index", l.index, "container_id", l.container.getId().toString(),
            "node_id", l.node(), "started", l.startedNanos >= 0, "start_error", l.startError));
      }
      return Json.obj(
          "mode", mode,
          "app_attempt_id", attemptId.toString(),
          "attempt", attemptId.getAttemptId(),
          "final_status", status.toString(),
          "containers_planned", containers,
          "allocated", allocated,
          "released_extra", releasedExtra,
          "surplus_completed", surplusCompleted,
          "replacements", replacements,
          "unexpected", new ArrayList<>(unexpected),
          "errors", new ArrayList<>(errors),
          "launches", started,
          "completions", new ArrayList<>(completions),
          "elapsed_ms", ms(System.nanoTime() - t0));
    }
  }

  private Map<String, Object> benchResult(long requestedAt, FinalApplicationStatus status) {
    synchronized (this) {
      List<Long> rpc = new ArrayList<>();
      List<Long> toRunning = new ArrayList<>();
      long lastTs = Long.MIN_VALUE;
      long firstWall = Long.MAX_VALUE;
      List<String> missing = new ArrayList<>();
      for (Launch l : launches.values()) {
        if (l.startedNanos < 0 || l.startError != null) {
          continue;
        }
        rpc.add(l.startedNanos - l.startCallNanos);
        firstWall = Math.min(firstWall, l.startCallEpochNanos);
        Path ts = shared.resolve(l.container.getId() + ".ts");
        try {
          long v = Long.parseLong(Files.readString(ts, StandardCharsets.US_ASCII).trim());
          toRunning.add(v - l.startCallEpochNanos);
          lastTs = Math.max(lastTs, v);
        } catch (IOException | NumberFormatException e) {
          missing.add(l.container.getId().toString());
        }
      }
      if (!missing.isEmpty()) {
        unexpected.add("no timestamp from " + missing);
        status = FinalApplicationStatus.FAILED;
      }
      Map<String, Integer> statuses = new LinkedHashMap<>();
      for (Map<String, Object> c : completions) {
        statuses.merge(String.valueOf(c.get("exit_status")), 1, Integer::sum);
      }
      return Json.obj(
          "mode", mode,
          "app_attempt_id", attemptId.toString(),
          "attempt", attemptId.getAttemptId(),
          "final_status", status.toString(),
          "containers_planned", containers,
          "per_node", Integer.parseInt(opt("per-node", "4")),
          "started_per_node", new LinkedHashMap<>(perNodeStarted),
          "max_running_per_node", new LinkedHashMap<>(maxRunning),
          "exit_statuses", statuses,
          "start_rpc_ms", summary(rpc),
          "start_to_running_ms", summary(toRunning),
          "wall_ms", firstStartNanos < 0 || lastCompletionNanos < 0 ? null
              : ms(lastCompletionNanos - firstStartNanos),
          "wall_to_last_timestamp_ms", lastTs == Long.MIN_VALUE ? null
              : ms(lastTs - firstWall),
          "wall_from_request_ms", lastCompletionNanos < 0 ? null
              : ms(lastCompletionNanos - requestedAt),
          "unexpected", new ArrayList<>(unexpected),
          "errors", new ArrayList<>(errors),
          "elapsed_ms", ms(System.nanoTime() - t0));
    }
  }

  /** Nearest-rank percentiles of nanosecond samples, in milliseconds. */
  static Map<String, Object> summary(List<Long> nanos) {
    List<Long> s = new ArrayList<>(nanos);
    Collections.sort(s);
    if (s.isEmpty()) {
      return Json.obj("count", 0, "p50", null, "p99", null, "max", null);
    }
    return Json.obj("count", s.size(), "p50", ms(rank(s, 0.50)), "p99", ms(rank(s, 0.99)),
        "min", ms(s.get(0)), "max", ms(s.get(s.size() - 1)));
  }

  private static long rank(List<Long> sorted, double q) {
    int r = (int) Math.ceil(q * sorted.size());
    return sorted.get(Math.max(0, Math.min(sorted.size() - 1, r - 1)));
  }

  private static double ms(long nanos) {
    return Math.round(nanos / 1000.0) / 1000.0;
  }

  private static long epochNanos() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000_000L + now.getNano();
  }

  private void writeResult(Map<String, Object> out) throws IOException {
    Files.createDirectories(result.getParent());
    Path tmp = result.resolveSibling(result.getFileName() + ".tmp");
    Files.writeString(tmp, Json.write(out) + "\n", StandardCharsets.UTF_8);
    Files.move(tmp, result, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
  }
}
