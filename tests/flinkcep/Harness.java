// Runs patterns on the real FlinkCEP (flink-cep and flink-dist jars, Java 17): the oracle
// of tests/flinkcep (see its __init__.py).  Reads a JSON list of cases (a pattern described
// as data and its events {key, id, ts, v}) and writes one line per match, timed-out partial
// match or refusal: case, M|T|E, key, {stage: [event ids]}, timestamp.  Cases run many to a
// local job at parallelism 1, events in time order, each case's events keyed by their key.
// Watermarks: monotonous (periodic) by default; WM=punctuated gives one after every event.
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.PatternStream;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.functions.TimedOutPartialMatchHandler;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.nfa.compiler.NFACompiler;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.WithinType;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

import java.io.*;
import java.nio.file.*;
import java.time.Duration;
import java.util.*;

public class Harness {
    static boolean PUNCT = "punctuated".equals(System.getenv("WM"));
    public static class Ev implements Serializable {
        public int c; public String key; public int id; public long ts; public int v;
        public Ev() {}
        public Ev(int c, String key, int id, long ts, int v) { this.c=c; this.key=key; this.id=id; this.ts=ts; this.v=v; }
        public String toString() { return "Ev(" + id + ")"; }
    }

    static SimpleCondition<Ev> cond(JsonNode disj) {
        // disj: list of [op, c]; OR of them
        final int n = disj.size();
        final String[] ops = new String[n]; final int[] cs = new int[n];
        for (int i = 0; i < n; i++) { ops[i] = disj.get(i).get(0).asText(); cs[i] = disj.get(i).get(1).asInt(); }
        return SimpleCondition.of((FilterFunction<Ev>) e -> {
            for (int i = 0; i < ops.length; i++) {
                int v = e.v; int c = cs[i]; boolean r;
                switch (ops[i]) {
                    case "eq": r = v == c; break;
                    case "ne": r = v != c; break;
                    case "lt": r = v < c; break;
                    case "gt": r = v > c; break;
                    case "le": r = v <= c; break;
                    case "ge": r = v >= c; break;
                    case "true": r = true; break;
                    default: throw new RuntimeException("op " + ops[i]);
                }
                if (r) return true;
            }
            return false;
        });
    }

    static Pattern<Ev, Ev> build(JsonNode pj) {
        JsonNode sk = pj.get("skip");
        AfterMatchSkipStrategy skip;
        String st = sk == null ? "noSkip" : sk.get("type").asText();
        switch (st) {
            case "noSkip": skip = AfterMatchSkipStrategy.noSkip(); break;
            case "skipToNext": skip = AfterMatchSkipStrategy.skipToNext(); break;
            case "skipPastLastEvent": skip = AfterMatchSkipStrategy.skipPastLastEvent(); break;
            case "skipToFirst": skip = AfterMatchSkipStrategy.skipToFirst(sk.get("stage").asText()); break;
            case "skipToLast": skip = AfterMatchSkipStrategy.skipToLast(sk.get("stage").asText()); break;
            default: throw new RuntimeException(st);
        }
        Pattern<Ev, Ev> p = null;
        for (JsonNode s : pj.get("stages")) {
            String name = s.get("name").asText();
            String ct = s.get("contiguity").asText();
            switch (ct) {
                case "begin": p = Pattern.<Ev>begin(name, skip); break;
                case "next": p = p.next(name); break;
                case "followedBy": p = p.followedBy(name); break;
                case "followedByAny": p = p.followedByAny(name); break;
                case "notNext": p = p.notNext(name); break;
                case "notFollowedBy": p = p.notFollowedBy(name); break;
                default: throw new RuntimeException(ct);
            }
            p = p.where(cond(s.get("cond")));
            JsonNode q = s.get("quant");
            if (q != null) {
                String k = q.get("kind").asText();
                switch (k) {
                    case "times": p = p.times(q.get("n").asInt()); break;
                    case "timesRange": p = p.times(q.get("n").asInt(), q.get("m").asInt()); break;
                    case "oneOrMore": p = p.oneOrMore(); break;
                    case "timesOrMore": p = p.timesOrMore(q.get("n").asInt()); break;
                    default: throw new RuntimeException(k);
                }
            }
            if (s.path("optional").asBoolean(false)) p = p.optional();
            if (s.path("greedy").asBoolean(false)) p = p.greedy();
            if (s.path("consecutive").asBoolean(false)) p = p.consecutive();
            if (s.path("allowCombinations").asBoolean(false)) p = p.allowCombinations();
            if (s.has("until")) p = p.until(cond(s.get("until")));
        }
        if (pj.has("within") && !pj.get("within").isNull()) {
            String wt = pj.path("withinType").asText("FIRST_AND_LAST");
            p = p.within(Duration.ofMillis(pj.get("within").asLong()), WithinType.valueOf(wt));
        }
        return p;
    }

    static String fmt(Map<String, List<Ev>> m) {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, List<Ev>> e : m.entrySet()) {
            if (!first) sb.append(","); first = false;
            sb.append('"').append(e.getKey()).append("\":[");
            for (int i = 0; i < e.getValue().size(); i++) { if (i > 0) sb.append(","); sb.append(e.getValue().get(i).id); }
            sb.append("]");
        }
        return sb.append("}").toString();
    }

    public static class Proc extends PatternProcessFunction<Ev, String> implements TimedOutPartialMatchHandler<Ev> {
        static final OutputTag<String> TO = new OutputTag<String>("timeouts") {};
        final int c;
        public Proc(int c) { this.c = c; }
        @Override public void processMatch(Map<String, List<Ev>> m, Context ctx, Collector<String> out) {
            String key = m.values().iterator().next().get(0).key;
            out.collect(c + "\tM\t" + key + "\t" + fmt(m) + "\t" + ctx.timestamp());
        }
        @Override public void processTimedOutMatch(Map<String, List<Ev>> m, Context ctx) {
            String key = m.values().iterator().next().get(0).key;
            ctx.output(TO, c + "\tT\t" + key + "\t" + fmt(m) + "\t" + ctx.timestamp());
        }
    }

    static void runBatch(List<JsonNode> cases, PrintWriter out) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        List<Ev> evs = new ArrayList<>();
        for (JsonNode cj : cases) {
            int c = cj.get("id").asInt();
            for (JsonNode e : cj.get("events"))
                evs.add(new Ev(c, e.get("key").asText(), e.get("id").asInt(), e.get("ts").asLong(), e.get("v").asInt()));
        }
        // events of each case are in ts order per case; the whole list is sorted by (ts) within a case only.
        // Watermarks are per source: so order globally by ts (stable) to keep every case in order.
        evs.sort(Comparator.comparingLong(e -> e.ts));
        WatermarkStrategy<Ev> ws = PUNCT
            ? WatermarkStrategy.<Ev>forGenerator(ctx -> new org.apache.flink.api.common.eventtime.WatermarkGenerator<Ev>() {
                  public void onEvent(Ev e, long t, org.apache.flink.api.common.eventtime.WatermarkOutput o) { o.emitWatermark(new org.apache.flink.api.common.eventtime.Watermark(t - 1)); }
                  public void onPeriodicEmit(org.apache.flink.api.common.eventtime.WatermarkOutput o) {}
              })
            : WatermarkStrategy.<Ev>forMonotonousTimestamps();
        DataStream<Ev> src = env.fromData(evs).assignTimestampsAndWatermarks(ws.withTimestampAssigner((e, t) -> e.ts));
        DataStream<String> all = null;
        for (JsonNode cj : cases) {
            final int c = cj.get("id").asInt();
            Pattern<Ev, Ev> p = build(cj.get("pattern"));
            DataStream<Ev> sub = src.filter(e -> e.c == c).keyBy(e -> e.key);
            SingleOutputStreamOperator<String> res = CEP.pattern(sub, p).process(new Proc(c));
            DataStream<String> both = res.union(res.getSideOutput(Proc.TO));
            all = all == null ? both : all.union(both);
        }
        try (CloseableIterator<String> it = all.executeAndCollect()) {
            while (it.hasNext()) out.println(it.next());
        }
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper om = new ObjectMapper();
        JsonNode root = om.readTree(new File(args[0]));
        int batch = args.length > 2 ? Integer.parseInt(args[2]) : 40;
        try (PrintWriter out = new PrintWriter(new FileWriter(args[1]))) {
            List<JsonNode> ok = new ArrayList<>();
            for (JsonNode cj : root) {
                int c = cj.get("id").asInt();
                try {
                    Pattern<Ev, Ev> p = build(cj.get("pattern"));
                    NFACompiler.compileFactory(p, true);
                    ok.add(cj);
                } catch (Throwable t) {
                    out.println(c + "\tE\t-\t" + t.getClass().getSimpleName() + ": " + String.valueOf(t.getMessage()).replace('\n', ' ').replace('\t', ' ') + "\t-");
                }
            }
            for (int i = 0; i < ok.size(); i += batch) {
                List<JsonNode> b = ok.subList(i, Math.min(ok.size(), i + batch));
                try {
                    runBatch(b, out);
                } catch (Throwable t) {
                    // rerun one by one to find the failing case
                    for (JsonNode cj : b) {
                        StringWriter sw = new StringWriter(); PrintWriter pw = new PrintWriter(sw);
                        try { runBatch(List.of(cj), pw); pw.flush(); out.print(sw); }
                        catch (Throwable t2) {
                            Throwable r = t2; while (r.getCause() != null) r = r.getCause();
                            out.println(cj.get("id").asInt() + "\tE\t-\tRUN " + r.getClass().getSimpleName() + ": " + String.valueOf(r.getMessage()).replace('\n', ' ').replace('\t', ' ') + "\t-");
                        }
                    }
                }
                out.flush();
                System.err.println("batch done " + (i + b.size()) + "/" + ok.size());
            }
        }
        System.exit(0);
    }
}
