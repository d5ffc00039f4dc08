// Kafka's own Java producer driven by a script on stdin, for the oracle tests
// (tests/oracle/java_producer.py compiles it against the Kafka jars at test time).
//
// One command per line, fields separated by one TAB:
//   CONFIG <name>=<value>     producer setting (before the producer's first record; an empty
//                             value removes it); bootstrap.servers comes from the first argument
//   NEW                       close the producer (flushing it); the next command opens another
//                             with the settings as changed by the CONFIG lines in between
//   SLEEP <ms>                wait (after a flush), e.g. for a time-based segment roll
//   BEGIN | COMMIT | ABORT    transaction control (needs CONFIG transactional.id=...); ABORT
//                             flushes first, so the aborted records are in the log
//   FLUSH                     wait until every record sent so far is acknowledged
//   REC <topic> <partition> <timestamp> <key> <value> <headers>
//       timestamp: ms, or "-" (the producer's clock); key, value: hex bytes, "-" for null;
//       headers: "" for none, else comma-separated <hex key>=<hex value> or <hex key> (null value)
// Prints "acked <n>" at the end; any failed send makes the exit code 1.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class OracleProducer {
    private static final HexFormat HEX = HexFormat.of();

    private static byte[] bytes(String field) {
        return field.equals("-") ? null : HEX.parseHex(field);
    }

    private static List<Header> headers(String field) {
        List<Header> out = new ArrayList<>();
        if (field.isEmpty()) return out;
        for (String h : field.split(",")) {
            int eq = h.indexOf('=');
            String key = new String(HEX.parseHex(eq < 0 ? h : h.substring(0, eq)), StandardCharsets.UTF_8);
            out.add(new RecordHeader(key, eq < 0 ? null : HEX.parseHex(h.substring(eq + 1))));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = null;
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicInteger acked = new AtomicInteger();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] f = line.split("\t", -1);
            if (f[0].equals("CONFIG")) {
                if (producer != null) throw new IllegalStateException("CONFIG while a producer is open: " + line);
                int eq = f[1].indexOf('=');
                String name = f[1].substring(0, eq), value = f[1].substring(eq + 1);
                if (value.isEmpty()) props.remove(name); else props.put(name, value);
                continue;
            }
            if (f[0].equals("NEW")) {
                if (producer != null) producer.close();
                producer = null;
                continue;
            }
            if (f[0].equals("SLEEP")) {
                if (producer != null) producer.flush();
                Thread.sleep(Long.parseLong(f[1]));
                continue;
            }
            if (producer == null) {
                producer = new KafkaProducer<>(props);
                if (props.containsKey("transactional.id")) producer.initTransactions();
            }
            switch (f[0]) {
                case "BEGIN" -> producer.beginTransaction();
                case "COMMIT" -> producer.commitTransaction();
                case "ABORT" -> {
                    producer.flush();  // the records reach the log before the ABORT marker
                    producer.abortTransaction();
                }
                case "FLUSH" -> producer.flush();
                case "REC" -> {
                    Long ts = f[3].equals("-") ? null : Long.parseLong(f[3]);
                    ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(
                        f[1], Integer.parseInt(f[2]), ts, bytes(f[4]), bytes(f[5]), headers(f[6]));
                    producer.send(rec, (md, e) -> {
                        if (e != null) failure.compareAndSet(null, e); else acked.incrementAndGet();
                    });
                }
                default -> throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        if (producer != null) {
            producer.flush();
            producer.close();
        }
        if (failure.get() != null) {
            failure.get().printStackTrace();
            System.exit(1);
        }
        System.out.println("acked " + acked.get());
    }
}
