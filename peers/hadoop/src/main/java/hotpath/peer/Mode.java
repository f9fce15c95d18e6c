package hotpath.peer;

import java.nio.file.Path;
import java.util.Map;

/** One launcher mode: starts its services, describes them, answers commands, stops them. */
interface Mode {
  /** Starts everything; returns when the services accept clients. */
  void start() throws Exception;

  /** The READY object: every address and port a test needs. */
  Map<String, Object> ready() throws Exception;

  /** Writes core-site.xml / hdfs-site.xml / yarn-site.xml for clients into {@code confDir}. */
  void writeConf(Path confDir) throws Exception;

  /** Answers one command; the returned map becomes the reply (the launcher adds "ok":true). */
  Map<String, Object> command(String name, String[] args) throws Exception;

  /** Stops every service this mode started. */
  void close() throws Exception;
}
