// Prints DIGEST-MD5 exchanges and wrapped messages made by the JDK's own SaslClient and
// SaslServer (com.sun.security.sasl.digest), with Hadoop-like callback handlers.
// Usage: javac DigestVectors.java && java DigestVectors > jdk17.txt
import java.util.*;
import javax.security.auth.callback.*;
import javax.security.sasl.*;

public class DigestVectors {
    static final String USER = "ABpoZGZzL2xvY2FsaG9zdEBFWEFNUExFLkNPTQAAigGObf7Sk4oBjpILVpMBAg==";
    static final String PASS = "Dg+PX4ZBgQkixXcDcnNMy5QCq04=";
    static final int[] SIZES = {1, 5, 6, 7, 8, 9, 100, 1000};

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x & 0xff));
        return s.toString();
    }

    static byte[] msg(int size, int salt) {
        byte[] m = new byte[size];
        for (int i = 0; i < size; i++) m[i] = (byte) (i * 7 + size + salt);
        return m;
    }

    public static void main(String[] args) throws Exception {
        // name, server qop, client qop, cipher property (or "-"), protocol, server name, authzid ("-" = none)
        String[][] cases = {
            {"ipc-auth", "auth", "auth", "-", "", "default", "-"},
            {"ipc-int", "auth-conf,auth-int,auth", "auth-int", "-", "", "default", "-"},
            {"ipc-conf-default", "auth-conf,auth-int,auth", "auth-conf", "-", "", "default", "-"},
            {"ipc-conf-rc4", "auth-conf", "auth-conf", "rc4", "", "default", "-"},
            {"ipc-conf-des", "auth-conf", "auth-conf", "des", "", "default", "-"},
            {"ipc-conf-rc4-56", "auth-conf", "auth-conf", "rc4-56", "", "default", "-"},
            {"ipc-conf-rc4-40", "auth-conf", "auth-conf", "rc4-40", "", "default", "-"},
            {"dt-conf", "auth-conf", "auth-conf", "-", "hdfs", "0", USER},
            {"dt-int", "auth-int", "auth-int", "-", "hdfs", "0", USER},
        };
        for (String[] c : cases) {
            String authzid = c[6].equals("-") ? null : c[6];
            boolean dataTransfer = authzid != null;
            Map<String, String> sp = new HashMap<>();
            sp.put(Sasl.QOP, c[1]);
            sp.put(Sasl.SERVER_AUTH, "true");
            CallbackHandler serverCbh = cbs -> {
                for (Callback cb : cbs) {
                    if (cb instanceof RealmCallback) ((RealmCallback) cb).setText(((RealmCallback) cb).getDefaultText());
                    else if (cb instanceof NameCallback) { }
                    else if (cb instanceof PasswordCallback) ((PasswordCallback) cb).setPassword(PASS.toCharArray());
                    else if (cb instanceof AuthorizeCallback) {
                        AuthorizeCallback ac = (AuthorizeCallback) cb;
                        ac.setAuthorized(dataTransfer || ac.getAuthenticationID().equals(ac.getAuthorizationID()));
                        if (ac.isAuthorized()) ac.setAuthorizedID(ac.getAuthorizationID());
                    }
                }
            };
            SaslServer ss = Sasl.createSaslServer("DIGEST-MD5", c[4], c[5], sp, serverCbh);
            Map<String, String> cp = new HashMap<>();
            cp.put(Sasl.QOP, c[2]);
            cp.put(Sasl.SERVER_AUTH, "true");
            if (!c[3].equals("-")) cp.put("com.sun.security.sasl.digest.cipher", c[3]);
            CallbackHandler clientCbh = cbs -> {
                for (Callback cb : cbs) {
                    if (cb instanceof NameCallback) ((NameCallback) cb).setName(USER);
                    else if (cb instanceof PasswordCallback) ((PasswordCallback) cb).setPassword(PASS.toCharArray());
                    else if (cb instanceof RealmCallback) ((RealmCallback) cb).setText(((RealmCallback) cb).getDefaultText());
                }
            };
            SaslClient sc = Sasl.createSaslClient(new String[] {"DIGEST-MD5"}, authzid, c[4], c[5], cp, clientCbh);
            byte[] challenge = ss.evaluateResponse(new byte[0]);
            byte[] response = sc.evaluateChallenge(challenge);
            byte[] rspauth = ss.evaluateResponse(response);
            byte[] last = sc.evaluateChallenge(rspauth);
            if (last != null || !sc.isComplete() || !ss.isComplete()) throw new AssertionError(c[0]);
            System.out.println("case " + c[0]);
            System.out.println("config " + c[1] + " " + c[2] + " " + c[3] + " " + (c[4].isEmpty() ? "-" : c[4]) + " " + c[5] + " " + (authzid == null ? "-" : "authzid"));
            System.out.println("challenge " + new String(challenge, "UTF-8"));
            System.out.println("response " + new String(response, "UTF-8"));
            System.out.println("rspauth " + new String(rspauth, "UTF-8"));
            System.out.println("qop " + sc.getNegotiatedProperty(Sasl.QOP) + " " + ss.getNegotiatedProperty(Sasl.QOP));
            System.out.println("rawsend " + sc.getNegotiatedProperty(Sasl.RAW_SEND_SIZE) + " " + ss.getNegotiatedProperty(Sasl.RAW_SEND_SIZE));
            System.out.println("authorized " + ss.getAuthorizationID());
            if (!"auth".equals(sc.getNegotiatedProperty(Sasl.QOP))) {
                for (int size : SIZES) {
                    byte[] m = msg(size, 0);
                    byte[] w = sc.wrap(m, 0, m.length);
                    if (!Arrays.equals(ss.unwrap(w, 0, w.length), m)) throw new AssertionError("c2s " + size);
                    System.out.println("c2s " + size + " " + hex(w));
                    m = msg(size, 1);
                    w = ss.wrap(m, 0, m.length);
                    if (!Arrays.equals(sc.unwrap(w, 0, w.length), m)) throw new AssertionError("s2c " + size);
                    System.out.println("s2c " + size + " " + hex(w));
                }
            }
            System.out.println("end");
        }
    }
}
