package hotpath.peer;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.security.token.TokenIdentifier;
import org.apache.hadoop.yarn.client.ClientRMProxy;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.security.client.RMDelegationTokenIdentifier;

/**
 * RM delegation tokens on the Java side ({@code yarn-client} commands), as Oozie, Spark and MR
 * clients use them:
 *
 * <ul>
 *   <li>{@code rmdt-get FILE RENEWER}: {@code YarnClient.getRMDelegationToken(RENEWER)}, the
 *       service set to {@code ClientRMProxy.getRMDelegationTokenService(conf)} (what
 *       {@code TokenCache} and Spark do), written to FILE as a {@code Credentials} file.
 *   <li>{@code rmdt-renew FILE} / {@code rmdt-cancel FILE}: {@code Token.renew(conf)} /
 *       {@code Token.cancel(conf)} on FILE's RM token, i.e. {@code RMDelegationTokenIdentifier
 *       .Renewer} over a fresh ApplicationClientProtocol proxy, as the current user.
 *   <li>{@code whoami}: the current user, how it logged in, whether it holds Kerberos
 *       credentials, and its tokens.
 * </ul>
 *
 * Replies carry the token's identifier as Java decodes it.
 */
final class RmTokens {
  private RmTokens() {}

  static Map<String, Object> get(YarnClient client, Configuration conf, String file,
      String renewer) throws Exception {
    org.apache.hadoop.yarn.api.records.Token yt = client.getRMDelegationToken(new Text(renewer));
    Text service = ClientRMProxy.getRMDelegationTokenService(conf);
    // what ConverterUtils.convertFromYarn(token, service) makes
    Token<TokenIdentifier> t = new Token<>(yt.getIdentifier().array(), yt.getPassword().array(),
        new Text(yt.getKind()), service);
    Credentials cred = new Credentials();
    cred.addToken(t.getService(), t);
    cred.writeTokenStorageFile(new Path(new File(file).toURI()), conf);
    Map<String, Object> m = describe(t);
    m.put("service_from_rm", yt.getService());
    m.put("file", file);
    return m;
  }

  static Token<? extends TokenIdentifier> read(Configuration conf, String file) throws Exception {
    Credentials cred = Credentials.readTokenStorageFile(new File(file), conf);
    for (Token<? extends TokenIdentifier> t : cred.getAllTokens()) {
      if (t.getKind().equals(RMDelegationTokenIdentifier.KIND_NAME)) {
        return t;
      }
    }
    throw new IllegalArgumentException("no RM_DELEGATION_TOKEN in " + file);
  }

  static Map<String, Object> renew(Configuration conf, String file) throws Exception {
    Token<? extends TokenIdentifier> t = read(conf, file);
    long next = t.renew(conf);
    return Json.obj("expiration", next,
        "user", UserGroupInformation.getCurrentUser().getUserName());
  }

  static Map<String, Object> cancel(Configuration conf, String file) throws Exception {
    Token<? extends TokenIdentifier> t = read(conf, file);
    t.cancel(conf);
    return Json.obj("cancelled", true,
        "user", UserGroupInformation.getCurrentUser().getUserName());
  }

  static Map<String, Object> whoami() throws Exception {
    UserGroupInformation ugi = UserGroupInformation.getCurrentUser();
    List<Object> tokens = new ArrayList<>();
    for (Token<? extends TokenIdentifier> t : ugi.getTokens()) {
      tokens.add(describe(t));
    }
    return Json.obj("user", ugi.getUserName(), "short_user", ugi.getShortUserName(),
        "auth", String.valueOf(ugi.getAuthenticationMethod()),
        "kerberos_credentials", ugi.hasKerberosCredentials(), "tokens", tokens);
  }

  static Map<String, Object> describe(Token<? extends TokenIdentifier> t) throws Exception {
    Map<String, Object> m = Json.obj("kind", t.getKind().toString(),
        "service", t.getService().toString(), "url", t.encodeToUrlString());
    TokenIdentifier id = t.decodeIdentifier();
    if (id instanceof RMDelegationTokenIdentifier d) {
      m.put("owner", d.getOwner().toString());
      m.put("renewer", d.getRenewer().toString());
      m.put("real_user", d.getRealUser().toString());
      m.put("issue_date", d.getIssueDate());
      m.put("max_date", d.getMaxDate());
      m.put("sequence_number", d.getSequenceNumber());
      m.put("master_key_id", d.getMasterKeyId());
      m.put("user", d.getUser().getUserName());
      m.put("to_string", d.toString());
    }
    return m;
  }
}
