package hotpath.peer;

import java.nio.file.Path;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/** YARN settings shared by the RM and NM modes (trap 8 in hadoop-wire.md). */
final class YarnConf {
  private YarnConf() {}

  static YarnConfiguration base(Args args, Path workDir) {
    YarnConfiguration conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", workDir.resolve("tmp").toString());
    conf.set(YarnConfiguration.RM_HOSTNAME, "localhost");
    conf.set(YarnConfiguration.RM_WEBAPP_ADDRESS, "localhost:0");
    conf.set(YarnConfiguration.RM_WEBAPP_HTTPS_ADDRESS, "localhost:0");
    conf.set(YarnConfiguration.NM_WEBAPP_ADDRESS, "127.0.0.1:0");
    conf.set(YarnConfiguration.NM_WEBAPP_HTTPS_ADDRESS, "127.0.0.1:0");
    // shared disks in CI are often more than 90 % full
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100.0f);
    conf.setLong(YarnConfiguration.NM_MIN_PER_DISK_FREE_SPACE_MB, 0);
    conf.setBoolean(YarnConfiguration.NM_RECOVERY_ENABLED, false);
    conf.setBoolean(YarnConfiguration.TIMELINE_SERVICE_ENABLED, false);
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, false);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    for (String[] kv : args.sets) {
      conf.set(kv[0], kv[1]);
    }
    return conf;
  }
}
