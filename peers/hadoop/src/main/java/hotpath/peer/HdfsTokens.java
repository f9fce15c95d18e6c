package hotpath.peer;

import java.io.File;
import java.net.URI;
import java.security.PrivilegedExceptionAction;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.security.token.delegation.DelegationTokenIdentifier;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.security.token.TokenIdentifier;

/**
 * HDFS delegation tokens in Credentials files, on the Java side, for the Rust token tests
 * ({@code hdfs --kerberos true} commands).
 *
 * <ul>
 *   <li>{@code fetchdt FILE [RENEWER]}: what {@code hdfs fetchdt --renewer RENEWER FILE} does
 *       ({@code DelegationTokenFetcher.saveDelegationToken}): the peer's FileSystem (logged in as
 *       {@code hdfs/localhost}) adds its delegation token to a {@code Credentials} and writes it
 *       with {@code writeTokenStorageFile}.
 *   <li>{@code token-stat FILE PATH}: reads FILE with {@code Credentials.readTokenStorageFile}
 *       and, as a user holding only those tokens (no Kerberos login), asks a fresh FileSystem for
 *       PATH's status: the token file is readable by Java and its token authenticates.
 * </ul>
 *
 * Both reply with the file's tokens, their identifiers decoded by Java.
 */
final class HdfsTokens {
  private HdfsTokens() {}

  static Map<String, Object> fetchdt(FileSystem fs, Configuration conf, String file,
      String renewer) throws Exception {
    Credentials cred = new Credentials();
    fs.addDelegationTokens(renewer, cred);
    cred.writeTokenStorageFile(new Path(new File(file).toURI()), conf);
    return Json.obj("file", file, "tokens", describe(cred));
  }

  static Map<String, Object> tokenStat(URI fsUri, Configuration conf, String file, String path)
      throws Exception {
    Credentials cred = Credentials.readTokenStorageFile(new File(file), conf);
    UserGroupInformation ugi = UserGroupInformation.createRemoteUser("token-holder");
    ugi.addCredentials(cred);
    FileStatus st = ugi.doAs((PrivilegedExceptionAction<FileStatus>) () -> {
      try (FileSystem fs = FileSystem.newInstance(fsUri, conf)) {
        return fs.getFileStatus(new Path(path));
      }
    });
    return Json.obj("file", file, "tokens", describe(cred), "path", path,
        "length", st.getLen(), "owner", st.getOwner());
  }

  private static List<Object> describe(Credentials cred) throws Exception {
    List<Object> l = new ArrayList<>();
    for (Token<? extends TokenIdentifier> t : cred.getAllTokens()) {
      Map<String, Object> m = Json.obj("kind", t.getKind().toString(),
          "service", t.getService().toString(), "url", t.encodeToUrlString());
      TokenIdentifier id = t.decodeIdentifier();
      if (id instanceof DelegationTokenIdentifier d) {
        m.put("owner", d.getOwner().toString());
        m.put("renewer", d.getRenewer().toString());
        m.put("issue_date", d.getIssueDate());
        m.put("max_date", d.getMaxDate());
        m.put("sequence_number", d.getSequenceNumber());
      }
      l.add(m);
    }
    return l;
  }
}
