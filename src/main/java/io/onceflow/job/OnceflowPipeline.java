package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.config.ProcessorRetries;
import io.onceflow.dedup.DeduplicateByMessageId;
import io.onceflow.dedup.MessageIdKey;
import io.onceflow.dedup.MessageIdKeyTypeInfo;
import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.IngestResult;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The onceflow dataflow, defined over whatever source and sinks it is given, so that tests can pass
 * bounded or failing ones and {@link OnceflowJob#main} only wires configuration to it:
 *
 * <pre>
 * source -&gt; split -&gt; keyBy(message id) -&gt; dedup -&gt; processor -&gt; Kafka [+ PostgreSQL]
 *             |                                       |
 *             dead letters -&gt; dead-letter sink &lt;- dead letters (rejected, failed)
 * </pre>
 *
 * <p>Every stateful operator and sink has a stable uid (the constants below): they are the
 * savepoint format. Changing one drops that operator's state on the next upgrade.
 */
public final class OnceflowPipeline {
    public static final String SOURCE_UID = "kafka-source";
    public static final String SPLIT_UID = "split-dead-letters";
    public static final String DEDUP_UID = "dedup-by-message-id";
    public static final String PROCESSOR_UID = "event-processor";
    public static final String OUTPUT_SINK_UID = "kafka-output-sink";
    public static final String DEAD_LETTER_SINK_UID = "dead-letter-sink";
    public static final String POSTGRES_SINK_UID = "postgres-sink";

    private OnceflowPipeline() {}

    /** The sinks of one pipeline. The PostgreSQL sink is optional; the two Kafka sinks are not. */
    public record Sinks(Sink<Event> kafkaOutput, Sink<DeadLetter> deadLetters, Optional<Sink<Event>> postgres) {
        public Sinks {
            Objects.requireNonNull(kafkaOutput, "kafkaOutput");
            Objects.requireNonNull(deadLetters, "deadLetters");
            Objects.requireNonNull(postgres, "postgres");
        }

        public static Sinks kafkaOnly(Sink<Event> kafkaOutput, Sink<DeadLetter> deadLetters) {
            return new Sinks(kafkaOutput, deadLetters, Optional.empty());
        }
    }

    /**
     * Adds the pipeline to {@code env}.
     *
     * @param source yields one {@link IngestResult} per input record; its checkpointed position is
     *     what makes replay after a failure possible
     * @param dedupTtl how long a message id is remembered
     * @param processor the business logic between dedup and the sinks
     * @param processorRetries how an event whose processor throws is retried before it is dead-lettered
     * @return the stream of events going to the sinks (for tests and extensions)
     */
    public static DataStream<Event> define(
            StreamExecutionEnvironment env,
            Source<IngestResult, ?, ?> source,
            Sinks sinks,
            Duration dedupTtl,
            EventProcessor processor,
            ProcessorRetries processorRetries) {
        SingleOutputStreamOperator<Event> accepted = env
                .fromSource(source, WatermarkStrategy.noWatermarks(), "Kafka source", TypeInformation.of(IngestResult.class))
                .uid(SOURCE_UID)
                .process(new SplitDeadLetters(), TypeInformation.of(Event.class))
                .uid(SPLIT_UID)
                .name("Split dead letters");

        SingleOutputStreamOperator<Event> output = accepted
                .keyBy(new MessageIdKey.Selector(), MessageIdKeyTypeInfo.INSTANCE)
                .process(new DeduplicateByMessageId(dedupTtl), TypeInformation.of(Event.class))
                .uid(DEDUP_UID)
                .name("Dedup by message id")
                .process(new RunEventProcessor(processor, processorRetries), TypeInformation.of(Event.class))
                .uid(PROCESSOR_UID)
                .name("Event processor");

        // one sink for both: its uid keeps the savepoints' state, and its transactional ids
        // (<prefix>-dlq) are the ones the fresh-start check and recovery look for
        accepted.getSideOutput(SplitDeadLetters.DEAD_LETTERS)
                .union(output.getSideOutput(RunEventProcessor.DEAD_LETTERS))
                .sinkTo(sinks.deadLetters())
                .uid(DEAD_LETTER_SINK_UID)
                .name("Dead-letter topic");

        output.sinkTo(sinks.kafkaOutput()).uid(OUTPUT_SINK_UID).name("Output topic");
        sinks.postgres().ifPresent(sink -> output.sinkTo(sink).uid(POSTGRES_SINK_UID).name("PostgreSQL"));
        return output;
    }
}
