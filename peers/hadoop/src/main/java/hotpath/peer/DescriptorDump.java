package hotpath.peer;

import java.io.OutputStream;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.thirdparty.protobuf.DescriptorProtos.FileDescriptorSet;
import org.apache.hadoop.thirdparty.protobuf.Descriptors.FileDescriptor;

/**
 * Dumps the compiled protobuf descriptors of Hadoop's generated classes: {@code DescriptorDump
 * OUT_FILE OUTER_CLASS...} writes one serialized {@code google.protobuf.FileDescriptorSet} holding
 * the file of every named outer class (e.g. {@code org.apache.hadoop.hdfs.protocol.proto.HdfsProtos})
 * and all their transitive imports, dependencies before dependents, each file once.
 *
 * <p>The descriptors come from the very jars the peer runs (the classes' {@code getDescriptor()}),
 * so a test can compare our {@code .proto} files with what Hadoop 3.5 actually compiled. Hadoop
 * 3.x shades protobuf as {@code org.apache.hadoop.thirdparty.protobuf}; the shaded client jars
 * keep that package, and the wire format of the set is protobuf's own.
 */
public final class DescriptorDump {
  private DescriptorDump() {}

  public static void main(String[] argv) throws Exception {
    if (argv.length < 2) {
      System.err.println("usage: DescriptorDump OUT_FILE OUTER_CLASS...");
      System.exit(2);
    }
    Map<String, FileDescriptor> files = new LinkedHashMap<>();
    for (int i = 1; i < argv.length; i++) {
      Method m = Class.forName(argv[i]).getMethod("getDescriptor");
      addWithDeps((FileDescriptor) m.invoke(null), files);
    }
    FileDescriptorSet.Builder set = FileDescriptorSet.newBuilder();
    for (FileDescriptor fd : files.values()) {
      set.addFile(fd.toProto());
    }
    try (OutputStream out = Files.newOutputStream(Paths.get(argv[0]))) {
      set.build().writeTo(out);
    }
    System.err.println("DescriptorDump: " + files.size() + " files to " + argv[0]);
  }

  /** Post-order walk without recursion limits: imports first, so the set is self-contained in order. */
  private static void addWithDeps(FileDescriptor root, Map<String, FileDescriptor> out) {
    Deque<FileDescriptor> stack = new ArrayDeque<>();
    Deque<Boolean> expanded = new ArrayDeque<>();
    stack.push(root);
    expanded.push(false);
    while (!stack.isEmpty()) {
      FileDescriptor fd = stack.pop();
      boolean done = expanded.pop();
      if (out.containsKey(fd.getName())) {
        continue;
      }
      if (done) {
        out.put(fd.getName(), fd);
        continue;
      }
      stack.push(fd);
      expanded.push(true);
      for (FileDescriptor dep : fd.getDependencies()) {
        if (!out.containsKey(dep.getName())) {
          stack.push(dep);
          expanded.push(false);
        }
      }
    }
  }
}
