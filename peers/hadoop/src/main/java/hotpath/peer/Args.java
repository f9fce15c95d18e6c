package hotpath.peer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Command-line options: `--name value` pairs after the mode word. `--set` and `--log-level` may
 * repeat; every other option keeps its last value.
 */
final class Args {
  final String mode;
  private final Map<String, String> single = new HashMap<>();
  final List<String[]> sets = new ArrayList<>();
  final List<String> logLevels = new ArrayList<>();

  private Args(String mode) {
    this.mode = mode;
  }

  static Args parse(String[] argv, int from) {
    if (argv.length <= from) {
      throw new IllegalArgumentException("missing mode");
    }
    Args a = new Args(argv[from]);
    for (int i = from + 1; i < argv.length; i++) {
      String k = argv[i];
      if (!k.startsWith("--")) {
        throw new IllegalArgumentException("unexpected argument: " + k);
      }
      if (i + 1 >= argv.length) {
        throw new IllegalArgumentException("option " + k + " needs a value");
      }
      String v = argv[++i];
      switch (k) {
        case "--set" -> {
          int eq = v.indexOf('=');
          if (eq <= 0) {
            throw new IllegalArgumentException("--set wants key=value, got " + v);
          }
          a.sets.add(new String[] {v.substring(0, eq), v.substring(eq + 1)});
        }
        case "--log-level" -> a.logLevels.add(v);
        default -> a.single.put(k.substring(2), v);
      }
    }
    return a;
  }

  String get(String name, String dflt) {
    return single.getOrDefault(name, dflt);
  }

  String require(String name) {
    String v = single.get(name);
    if (v == null) {
      throw new IllegalArgumentException("--" + name + " is required");
    }
    return v;
  }

  long getLong(String name, long dflt) {
    String v = single.get(name);
    return v == null ? dflt : Long.parseLong(v);
  }

  int getInt(String name, int dflt) {
    String v = single.get(name);
    return v == null ? dflt : Integer.parseInt(v);
  }

  boolean has(String name) {
    return single.containsKey(name);
  }
}
