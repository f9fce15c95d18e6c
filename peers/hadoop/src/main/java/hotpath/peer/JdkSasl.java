package hotpath.peer;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.sasl.AuthorizeCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.RealmChoiceCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;
import javax.security.sasl.SaslException;
import javax.security.sasl.SaslServer;

/**
 * Plain {@code javax.security.sasl} DIGEST-MD5 sessions (no Hadoop), named by the caller, so a
 * test can play one side of an exchange itself and compare bytes and error texts with the JDK.
 * Also {@code bench-wrap}: wrap/unwrap throughput of an in-process JDK client/server pair.
 */
final class JdkSasl {
  static final String MECH = "DIGEST-MD5";
  /** The JDK's property naming the DIGEST-MD5 cipher a client asks for. */
  static final String CIPHER_PROP = "com.sun.security.sasl.digest.cipher";

  /**
   * One named session: exactly one of server/client is set. {@code cipher} holds the cipher
   * directive of the client's DIGEST response once it passed through (the JDK does not expose
   * the negotiated cipher as a property).
   */
  private static final class Session {
    final SaslServer server;
    final SaslClient client;
    String cipher;

    Session(SaslServer server, SaslClient client) {
      this.server = server;
      this.client = client;
    }

    boolean isComplete() {
      return server != null ? server.isComplete() : client.isComplete();
    }

    Object negotiated(String prop) {
      return server != null ? server.getNegotiatedProperty(prop) : client.getNegotiatedProperty(prop);
    }

    byte[] wrap(byte[] b) throws SaslException {
      return server != null ? server.wrap(b, 0, b.length) : client.wrap(b, 0, b.length);
    }

    byte[] unwrap(byte[] b) throws SaslException {
      return server != null ? server.unwrap(b, 0, b.length) : client.unwrap(b, 0, b.length);
    }

    void dispose() throws SaslException {
      if (server != null) {
        server.dispose();
      } else {
        client.dispose();
      }
    }
  }

  private final Map<String, Session> sessions = new HashMap<>();

  Map<String, Object> command(String name, String[] a) throws Exception {
    switch (name) {
      case "jdk-server-new": {
        SaslMode.need(name, a, 6, 6, "ID PROTOCOL SERVERNAME QOPS USER PASSWORD");
        SaslServer s = Sasl.createSaslServer(MECH, dash(a[1]), a[2], props(a[3], null),
            serverCallbacks(a[4], a[5]));
        if (s == null) {
          throw new IllegalStateException("no " + MECH + " SaslServer in this JDK");
        }
        put(a[0], new Session(s, null));
        return Json.obj("challenge", SaslMode.b64(s.evaluateResponse(new byte[0])));
      }
      case "jdk-server-step": {
        SaslMode.need(name, a, 2, 2, "ID B64");
        Session s = get(a[0], true);
        byte[] response = SaslMode.unb64(a[1]);
        byte[] token = s.server.evaluateResponse(response);
        s.cipher = cipherDirective(response, s.cipher);
        return stepReply(s, token);
      }
      case "jdk-client-new": {
        SaslMode.need(name, a, 6, 8,
            "ID PROTOCOL SERVERNAME QOPS USER PASSWORD [AUTHZID|-] [CIPHER|-]");
        String authzid = a.length > 6 ? dash(a[6]) : "";
        String cipher = a.length > 7 ? dash(a[7]) : "";
        SaslClient c = Sasl.createSaslClient(new String[] {MECH}, authzid.isEmpty() ? null : authzid,
            dash(a[1]), a[2], props(a[3], cipher.isEmpty() ? null : cipher),
            clientCallbacks(a[4], a[5]));
        if (c == null) {
          throw new IllegalStateException("no " + MECH + " SaslClient in this JDK");
        }
        put(a[0], new Session(null, c));
        return Json.obj();
      }
      case "jdk-client-step": {
        SaslMode.need(name, a, 2, 2, "ID B64");
        Session s = get(a[0], false);
        byte[] token = s.client.evaluateChallenge(SaslMode.unb64(a[1]));
        s.cipher = cipherDirective(token, s.cipher);
        return stepReply(s, token);
      }
      case "jdk-wrap": {
        SaslMode.need(name, a, 2, 2, "ID B64");
        return Json.obj("token", SaslMode.b64(get(a[0], null).wrap(SaslMode.unb64(a[1]))));
      }
      case "jdk-unwrap": {
        SaslMode.need(name, a, 2, 2, "ID B64");
        return Json.obj("plain", SaslMode.b64(get(a[0], null).unwrap(SaslMode.unb64(a[1]))));
      }
      case "jdk-dispose": {
        SaslMode.need(name, a, 1, 1, "ID");
        Session s = sessions.remove(a[0]);
        if (s != null) {
          s.dispose();
        }
        return Json.obj("existed", s != null);
      }
      case "bench-wrap":
        SaslMode.need(name, a, 4, 4, "QOP CIPHER|- BYTES SECONDS");
        return benchWrap(a[0], dash(a[1]), Integer.parseInt(a[2]), Double.parseDouble(a[3]));
      default:
        throw new IllegalArgumentException("unknown command " + name);
    }
  }

  private static String dash(String s) {
    return s.equals("-") ? "" : s;
  }

  private void put(String id, Session s) throws SaslException {
    Session old = sessions.put(id, s);
    if (old != null) {
      old.dispose();
    }
  }

  /** The session {@code id}; {@code server} true/false demands that side, null takes either. */
  private Session get(String id, Boolean server) {
    Session s = sessions.get(id);
    if (s == null) {
      throw new IllegalArgumentException("no JDK SASL session " + id);
    }
    if (server != null && server != (s.server != null)) {
      throw new IllegalArgumentException("JDK SASL session " + id + " is a "
          + (s.server != null ? "server" : "client"));
    }
    return s;
  }

  private static Map<String, Object> stepReply(Session s, byte[] token) {
    Map<String, Object> m = Json.obj("token", SaslMode.b64(token), "complete", s.isComplete());
    if (s.isComplete()) {
      Object qop = s.negotiated(Sasl.QOP);
      m.put("qop", qop);
      if ("auth-conf".equals(qop) && s.cipher != null) {
        m.put("cipher", s.cipher);
      }
    }
    return m;
  }

  private static final java.util.regex.Pattern CIPHER_DIRECTIVE =
      java.util.regex.Pattern.compile("(?:^|,)\\s*cipher\\s*=\\s*\"?([^\",]*)\"?",
          java.util.regex.Pattern.CASE_INSENSITIVE);

  /** The {@code cipher} directive of a DIGEST-MD5 response, else {@code previous}. */
  static String cipherDirective(byte[] response, String previous) {
    if (response == null) {
      return previous;
    }
    java.util.regex.Matcher m = CIPHER_DIRECTIVE.matcher(
        new String(response, java.nio.charset.StandardCharsets.ISO_8859_1));
    return m.find() ? m.group(1) : previous;
  }

  /** As Hadoop's SaslPropertiesResolver: the QOP list and mutual authentication. */
  private static Map<String, String> props(String qops, String cipher) {
    Map<String, String> p = new LinkedHashMap<>();
    p.put(Sasl.QOP, qops);
    p.put(Sasl.SERVER_AUTH, "true");
    if (cipher != null) {
      p.put(CIPHER_PROP, cipher);
    }
    return p;
  }

  /**
   * Knows one user: the password callback is answered only for USER; realm = the offered default;
   * authorized iff the authorization id equals the authentication id (as Hadoop's handler).
   */
  static CallbackHandler serverCallbacks(String user, String password) {
    return callbacks -> {
      String name = null;
      PasswordCallback pc = null;
      for (Callback cb : callbacks) {
        if (cb instanceof NameCallback nc) {
          name = nc.getDefaultName();
        } else if (cb instanceof PasswordCallback p) {
          pc = p;
        } else if (cb instanceof RealmCallback rc) {
          rc.setText(rc.getDefaultText());
        } else if (cb instanceof AuthorizeCallback ac) {
          boolean ok = ac.getAuthenticationID().equals(ac.getAuthorizationID());
          ac.setAuthorized(ok);
          if (ok) {
            ac.setAuthorizedID(ac.getAuthorizationID());
          }
        } else {
          throw new UnsupportedCallbackException(cb);
        }
      }
      if (pc != null && user.equals(name)) {
        pc.setPassword(password.toCharArray());
      }
    };
  }

  static CallbackHandler clientCallbacks(String user, String password) {
    return callbacks -> {
      for (Callback cb : callbacks) {
        if (cb instanceof NameCallback nc) {
          nc.setName(user);
        } else if (cb instanceof PasswordCallback pc) {
          pc.setPassword(password.toCharArray());
        } else if (cb instanceof RealmCallback rc) {
          rc.setText(rc.getDefaultText());
        } else if (cb instanceof RealmChoiceCallback rcc) {
          rcc.setSelectedIndex(0);
        } else {
          throw new UnsupportedCallbackException(cb);
        }
      }
    };
  }

  private static final double WARMUP_SECONDS = 1.0;

  /**
   * A client/server pair negotiated at {@code qop} (protocol "", server "default", as Hadoop's
   * IPC), then client wrap + server unwrap of {@code bytes}-sized messages for {@code seconds}
   * after a one-second warm-up (same loop, not counted).
   */
  private static Map<String, Object> benchWrap(String qop, String cipher, int bytes, double seconds)
      throws Exception {
    if (bytes <= 0 || !(seconds > 0)) {
      throw new IllegalArgumentException("bench-wrap: BYTES and SECONDS must be positive");
    }
    String user = "bench-user";
    String password = "bench-password";
    SaslServer server = Sasl.createSaslServer(MECH, "", "default", props(qop, null),
        serverCallbacks(user, password));
    SaslClient client = Sasl.createSaslClient(new String[] {MECH}, null, "", "default",
        props(qop, cipher.isEmpty() ? null : cipher), clientCallbacks(user, password));
    try {
      byte[] response = client.evaluateChallenge(server.evaluateResponse(new byte[0]));
      byte[] rspauth = server.evaluateResponse(response);
      client.evaluateChallenge(rspauth);
      if (!client.isComplete() || !server.isComplete()) {
        throw new IllegalStateException("bench-wrap: negotiation did not complete");
      }
      byte[] msg = new byte[bytes];
      new Random(42).nextBytes(msg);
      byte[] wrapped = client.wrap(msg, 0, msg.length);
      byte[] plain = server.unwrap(wrapped, 0, wrapped.length);
      if (!java.util.Arrays.equals(msg, plain)) {
        throw new IllegalStateException("bench-wrap: the server's unwrap gave " + plain.length
            + " bytes, not the " + bytes + " wrapped");
      }
      int warm = loop(client, server, msg, WARMUP_SECONDS, null);
      long[] ns = new long[2];
      int n = loop(client, server, msg, seconds, ns);
      double total = ns[0] + ns[1];
      return Json.obj(
          "qop", server.getNegotiatedProperty(Sasl.QOP),
          "cipher", cipherDirective(response, null),
          "bytes", bytes,
          "wrapped_bytes", wrapped.length,
          "mb_per_s", (double) bytes * n / total * 1e3,
          "iterations", n,
          "warmup_iterations", warm,
          "wrap_ns", (double) ns[0] / n,
          "unwrap_ns", (double) ns[1] / n);
    } finally {
      client.dispose();
      server.dispose();
    }
  }

  private static int loop(SaslClient c, SaslServer s, byte[] msg, double seconds, long[] ns)
      throws SaslException {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    int n = 0;
    long sink = 0;
    while (true) {
      long t0 = System.nanoTime();
      if (t0 >= end && n > 0) {
        break;
      }
      byte[] w = c.wrap(msg, 0, msg.length);
      long t1 = System.nanoTime();
      byte[] p = s.unwrap(w, 0, w.length);
      long t2 = System.nanoTime();
      sink += p.length;
      if (ns != null) {
        ns[0] += t1 - t0;
        ns[1] += t2 - t1;
      }
      n++;
    }
    if (sink != (long) n * msg.length) {
      throw new IllegalStateException("bench-wrap: an unwrap lost bytes (bad MAC?)");
    }
    return n;
  }

  void disposeAll() {
    for (Session s : sessions.values()) {
      try {
        s.dispose();
      } catch (SaslException ignored) {
        // closing anyway
      }
    }
    sessions.clear();
  }
}
