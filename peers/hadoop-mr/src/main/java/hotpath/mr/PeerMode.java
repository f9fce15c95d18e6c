package hotpath.mr;

import java.nio.file.Path;
import java.util.Map;

/** One mode of {@link MrLauncher}: started once, then driven by one-line commands. */
interface PeerMode {
  void start() throws Exception;

  /** Writes the site files a client of this mode needs into {@code confDir}. */
  void writeConf(Path confDir) throws Exception;

  /** The fields of the READY line. */
  Map<String, Object> ready();

  /** Answers one command; a thrown exception becomes an {@code ok:false} reply. */
  Map<String, Object> command(String name, String[] args) throws Exception;

  void close() throws Exception;
}
