// Reads lines "<base64 envelope>" (Connect's JSON with schemas.enable=true, as eos wrote it),
// has Kafka Connect's JsonConverter read each back and write it again with schemas.enable
// true and false (decimal.format from the first argument), and prints both, base64, one
// line each: what Connect itself writes for the same schema and value.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

public class ConnectJson {
    public static void main(String[] args) throws Exception {
        String decimalFormat = args.length > 0 ? args[0] : "BASE64";
        JsonConverter withSchemas = new JsonConverter();
        withSchemas.configure(Map.of("schemas.enable", "true", "decimal.format", decimalFormat), false);
        JsonConverter plain = new JsonConverter();
        plain.configure(Map.of("schemas.enable", "false", "decimal.format", decimalFormat), false);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Base64.Encoder b64 = Base64.getEncoder();
        for (String line; (line = in.readLine()) != null; ) {
            SchemaAndValue read = withSchemas.toConnectData("t", Base64.getDecoder().decode(line));
            byte[] envelope = withSchemas.fromConnectData("t", read.schema(), read.value());
            byte[] payload = plain.fromConnectData("t", read.schema(), read.value());
            System.out.println(b64.encodeToString(envelope) + " " + b64.encodeToString(payload));
        }
    }
}
