// KRaft metadata records written by Kafka's own classes (test harness for tests/oracle/test_dump_oracle.py).
//
// Usage: java -cp <build>:<kafka jars>/* MetadataRecordsLog <segment file>
// stdin: one record a line, "<apiKey>\t<version>\t<the record as JSON>". Each line is read into
// Kafka's generated message by MetadataJsonConverters.readJson, framed by MetadataRecordSerde
// (frame version, api key, version, message) and becomes one record's value (no key); all of
// them go into one uncompressed batch at offset 0, written to the segment file.

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.metadata.MetadataJsonConverters;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class MetadataRecordsLog {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        List<SimpleRecord> records = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] part = line.split("\t", 3);
            short apiKey = Short.parseShort(part[0]);
            short version = Short.parseShort(part[1]);
            ApiMessage message = MetadataJsonConverters.readJson(json.readTree(part[2]), apiKey, version);
            ApiMessageAndVersion framed = new ApiMessageAndVersion(message, version);
            ObjectSerializationCache cache = new ObjectSerializationCache();
            ByteBuffer value = ByteBuffer.allocate(MetadataRecordSerde.INSTANCE.recordSize(framed, cache));
            MetadataRecordSerde.INSTANCE.write(framed, cache, new ByteBufferAccessor(value));
            value.flip();
            records.add(new SimpleRecord(1700000000000L + records.size(), null, value));
        }
        ByteBuffer batch = MemoryRecords.withRecords(0L, Compression.NONE,
                records.toArray(new SimpleRecord[0])).buffer();
        try (FileChannel out = FileChannel.open(Paths.get(args[0]), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            while (batch.hasRemaining()) out.write(batch);
        }
        System.out.println(records.size());
    }
}
