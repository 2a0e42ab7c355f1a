// Reads lines "<kind> <text>" and prints, per line, what Kafka's own classes make of it:
//   number <Short|Integer|Long|Float|Double|Boolean> <value>  -> base64 of Kafka's serializer
//   header <base64 bytes>  -> SimpleHeaderConverter.toConnectHeader's schema type (and logical
//                             name, element types), then base64 of fromConnectHeader of that
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;

public class ConnectHeaders {
    public static void main(String[] args) throws Exception {
        SimpleHeaderConverter headers = new SimpleHeaderConverter();
        Base64.Encoder b64 = Base64.getEncoder();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] parts = line.split(" ", 3);
            if (parts[0].equals("number")) {
                System.out.println(b64.encodeToString(serialize(parts[1], parts[2])));
                continue;
            }
            byte[] data = Base64.getDecoder().decode(parts[1]);
            SchemaAndValue read = headers.toConnectHeader("t", "h", data);
            if (read == null || read.value() == null) {
                System.out.println("null -");
                continue;
            }
            byte[] written = headers.fromConnectHeader("t", "h", read.schema(), read.value());
            System.out.println(describe(read.schema()) + " " + b64.encodeToString(written));
        }
    }

    static String describe(Schema s) {
        String out = s.type().toString() + (s.name() != null ? "/" + s.name() : "");
        if (s.type() == Schema.Type.ARRAY) {
            out += "<" + (s.valueSchema() == null ? "" : describe(s.valueSchema())) + ">";
        } else if (s.type() == Schema.Type.MAP) {
            out += "<" + (s.keySchema() == null ? "" : describe(s.keySchema())) + ","
                + (s.valueSchema() == null ? "" : describe(s.valueSchema())) + ">";
        }
        return out;
    }

    static byte[] serialize(String type, String text) {
        switch (type) {
            case "Short": return new ShortSerializer().serialize("t", Short.parseShort(text));
            case "Integer": return new IntegerSerializer().serialize("t", Integer.parseInt(text));
            case "Long": return new LongSerializer().serialize("t", Long.parseLong(text));
            case "Float": return new FloatSerializer().serialize("t", Float.parseFloat(text));
            case "Double": return new DoubleSerializer().serialize("t", Double.parseDouble(text));
            case "Boolean": return new BooleanSerializer().serialize("t", Boolean.parseBoolean(text));
            default: throw new IllegalArgumentException(type);
        }
    }
}
