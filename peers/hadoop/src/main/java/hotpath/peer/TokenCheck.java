package hotpath.peer;

import java.util.HexFormat;
import org.apache.hadoop.hdfs.security.token.delegation.DelegationTokenIdentifier;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.token.SecretManager;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.security.token.TokenIdentifier;
import org.apache.hadoop.security.token.delegation.AbstractDelegationTokenSecretManager;
import org.apache.hadoop.security.token.delegation.DelegationKey;
import org.apache.hadoop.util.Time;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.security.AMRMTokenIdentifier;

/**
 * One-shot token arithmetic and secret-manager texts from Hadoop's own classes, for the Rust
 * token tests. Prints tab-separated {@code name value…} lines on stdout.
 *
 * <ul>
 *   <li>{@code amrm <keyhex> <clusterTs> <appId> <attempt> <keyId>}: an AMRMTokenIdentifier's
 *       bytes and {@code SecretManager.createPassword} over them with the given raw key.
 *   <li>{@code dt <ms,ms,…>}: {@code Time.formatTime} of each value, then a real
 *       {@code AbstractDelegationTokenSecretManager} (HDFS identifiers, 3.5.0 defaults) after
 *       its remover's first roll: its keys, one minted token, and the class and text of each
 *       refusal the Rust manager reproduces.
 * </ul>
 */
public final class TokenCheck {
  private TokenCheck() {}

  static final HexFormat HEX = HexFormat.of();

  static void out(String... fields) {
    System.out.println(String.join("\t", fields));
  }

  /** Exposes SecretManager's protected static HMAC. */
  static final class Hmac extends SecretManager<TokenIdentifier> {
    static byte[] password(byte[] identifier, byte[] key) {
      return createPassword(identifier, createSecretKey(key));
    }

    @Override
    protected byte[] createPassword(TokenIdentifier id) {
      throw new UnsupportedOperationException();
    }

    @Override
    public byte[] retrievePassword(TokenIdentifier id) {
      throw new UnsupportedOperationException();
    }

    @Override
    public TokenIdentifier createIdentifier() {
      throw new UnsupportedOperationException();
    }
  }

  static final class Dtsm extends AbstractDelegationTokenSecretManager<DelegationTokenIdentifier> {
    Dtsm(long renewInterval) {
      super(86400000L, 604800000L, renewInterval, 3600000L);
    }

    @Override
    public DelegationTokenIdentifier createIdentifier() {
      return new DelegationTokenIdentifier();
    }
  }

  interface Call {
    Object run() throws Exception;
  }

  static void refusal(String name, Call c) {
    try {
      Object r = c.run();
      out(name, "ok", String.valueOf(r));
    } catch (Exception e) {
      out(name, e.getClass().getName(), e.getMessage());
    }
  }

  public static void main(String[] a) throws Exception {
    switch (a[0]) {
      case "amrm": {
        byte[] key = HEX.parseHex(a[1]);
        ApplicationAttemptId attempt =
            ApplicationAttemptId.newInstance(
                ApplicationId.newInstance(Long.parseLong(a[2]), Integer.parseInt(a[3])),
                Integer.parseInt(a[4]));
        AMRMTokenIdentifier id = new AMRMTokenIdentifier(attempt, Integer.parseInt(a[5]));
        out("identifier", HEX.formatHex(id.getBytes()));
        out("password", HEX.formatHex(Hmac.password(id.getBytes(), key)));
        out("kind", id.getKind().toString());
        out("user", id.getUser().getUserName());
        break;
      }
      case "dt": {
        for (String t : a[1].split(",")) {
          out("time", t, Time.formatTime(Long.parseLong(t)));
        }
        Dtsm m = new Dtsm(86400000L);
        m.startThreads();
        while (m.getAllKeys().length < 2) {
          Thread.sleep(5);
        }
        for (DelegationKey k : m.getAllKeys()) {
          out("key", String.valueOf(k.getKeyId()), HEX.formatHex(k.getEncodedKey()));
        }
        DelegationTokenIdentifier id =
            new DelegationTokenIdentifier(new Text("alice"), new Text("yarn"), new Text("oozie"));
        Token<DelegationTokenIdentifier> tok = new Token<>(id, m);
        out("token", HEX.formatHex(tok.getIdentifier()), HEX.formatHex(tok.getPassword()));
        out("toString", id.toString());

        DelegationTokenIdentifier unknown =
            new DelegationTokenIdentifier(new Text("bob"), new Text("yarn"), new Text("carol"));
        unknown.setSequenceNumber(999);
        refusal("unknown", () -> m.retrievePassword(unknown));
        refusal("wrong-password", () -> {
          m.verifyToken(id, new byte[20]);
          return null;
        });
        refusal("wrong-renewer", () -> m.renewToken(tok, "mallory"));
        Token<DelegationTokenIdentifier> forged =
            new Token<>(tok.getIdentifier(), new byte[20], tok.getKind(), tok.getService());
        refusal("renew-wrong-password", () -> m.renewToken(forged, "yarn"));

        DelegationTokenIdentifier noRenewer =
            new DelegationTokenIdentifier(new Text("alice"), null, new Text(""));
        Token<DelegationTokenIdentifier> noRenewerTok = new Token<>(noRenewer, m);
        out("no-renewer-token", HEX.formatHex(noRenewerTok.getIdentifier()));
        refusal("renew-no-renewer", () -> m.renewToken(noRenewerTok, ""));

        DelegationTokenIdentifier alien =
            new DelegationTokenIdentifier(new Text("alice"), new Text("yarn"), new Text(""));
        alien.setIssueDate(1);
        alien.setMaxDate(Long.MAX_VALUE / 2);
        alien.setSequenceNumber(5);
        alien.setMasterKeyId(77);
        refusal(
            "renew-unknown-key",
            () -> m.renewToken(new Token<>(alien.getBytes(), new byte[20], alien.getKind(), new Text()), "yarn"));

        DelegationTokenIdentifier old =
            new DelegationTokenIdentifier(new Text("alice"), new Text("yarn"), new Text(""));
        old.setIssueDate(1711242400403L);
        old.setMaxDate(1711847200403L);
        old.setSequenceNumber(1);
        old.setMasterKeyId(2);
        refusal(
            "renew-past-max",
            () -> m.renewToken(new Token<>(old.getBytes(), new byte[20], old.getKind(), new Text()), "yarn"));

        refusal("cancel-stranger", () -> m.cancelToken(tok, "mallory"));
        refusal("renew", () -> m.renewToken(tok, "yarn") - 0);
        refusal("cancel-renewer", () -> m.cancelToken(tok, "yarn").getSequenceNumber());
        refusal("cancel-again", () -> m.cancelToken(tok, "alice"));
        refusal("renew-cancelled", () -> m.renewToken(tok, "yarn"));
        DelegationTokenIdentifier ownerless =
            new DelegationTokenIdentifier(new Text(""), new Text("yarn"), new Text(""));
        ownerless.setSequenceNumber(8);
        refusal(
            "cancel-ownerless",
            () -> m.cancelToken(new Token<>(ownerless.getBytes(), new byte[20], ownerless.getKind(), new Text()), "yarn"));
        m.stopThreads();

        // A manager whose tokens must be renewed within 1 ms: checkToken's expiry text.
        Dtsm quick = new Dtsm(1L);
        quick.startThreads();
        while (quick.getAllKeys().length < 2) {
          Thread.sleep(5);
        }
        DelegationTokenIdentifier q =
            new DelegationTokenIdentifier(new Text("alice"), new Text("yarn"), new Text("oozie"));
        Token<DelegationTokenIdentifier> qt = new Token<>(q, quick);
        Thread.sleep(20);
        out("expired-token", HEX.formatHex(qt.getIdentifier()));
        refusal("expired", () -> quick.retrievePassword(q));
        quick.stopThreads();
        break;
      }
      default:
        throw new IllegalArgumentException("unknown command " + a[0]);
    }
    System.out.flush();
    System.exit(0);
  }
}
