package hotpath.peer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/** Writes a Hadoop site file (`<configuration><property>...`) from an ordered key/value map. */
final class SiteXml {
  private SiteXml() {}

  static void write(Path file, Map<String, String> props) throws IOException {
    StringBuilder sb = new StringBuilder();
    sb.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb.append("<!-- written by the hotpath test peer (peers/hadoop) -->\n<configuration>\n");
    for (Map.Entry<String, String> e : props.entrySet()) {
      sb.append("  <property><name>").append(esc(e.getKey())).append("</name><value>")
          .append(esc(e.getValue())).append("</value></property>\n");
    }
    sb.append("</configuration>\n");
    Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
    Files.writeString(tmp, sb.toString(), StandardCharsets.UTF_8);
    Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
  }

  private static String esc(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }
}
