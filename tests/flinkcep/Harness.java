// Runs patterns on the real FlinkCEP (flink-cep and flink-dist jars, Java 17): the oracle
// of tests/flinkcep (see its __init__.py).  Reads a JSON list of cases (a pattern described
// as data and its events {key, id, ts, v}) and writes one line per match, timed-out partial
// match or refusal: case, M|T|E, key, {stage: [event ids]}, timestamp.  Cases run many to a
// local job at parallelism 1, events in time order, each case's events keyed by their key.
// Watermarks: one at the end of the input by default (as cep.match); WM=periodic gives
// Flink's monotonous ones by the wall clock, WM=punctuated one after every event.
// Patterns: stages with conditions on v (plain ones as SimpleConditions, ones reading the
// partial match as IterativeConditions over getEventsForPattern), groups (Pattern.begin /
// next / followedBy / followedByAny of a pattern) and loop windows (times(n, Duration) ...).
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
import org.apache.flink.cep.pattern.conditions.IterativeCondition;
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

    // A reference to the partial match (see cases.py): the v of an event a stage took, a
    // stage's count or sum, or prev (the event taken last, whatever its stage: the largest
    // id, as ids grow with arrival within a key), plus "add"; null where cep's is null
    // (first/last/min/max of a stage that took nothing, prev before the first event),
    // which is what an empty getEventsForPattern iterator gives here.
    static final class Operand implements Serializable {
        final String fn; final String stage; final long constant; final long add; final String[] names;
        Operand(JsonNode o, String[] names) {
            this.names = names;
            if (o.isObject()) {
                fn = o.get("fn").asText(); stage = o.path("stage").asText(null); add = o.path("add").asLong(0); constant = 0;
            } else { fn = "const"; stage = null; add = 0; constant = o.asLong(); }
        }
        Operand(String fn, String[] names) { this.fn = fn; this.stage = null; this.add = 0; this.constant = 0; this.names = names; }
        Long eval(Ev e, IterativeCondition.Context<Ev> ctx) throws Exception {
            switch (fn) {
                case "const": return constant;
                case "v": return (long) e.v;
                case "prev": {
                    Ev last = null;
                    for (String n : names)
                        for (Ev x : ctx.getEventsForPattern(n)) if (last == null || x.id > last.id) last = x;
                    return last == null ? null : (long) last.v + add;
                }
                default: break;
            }
            long count = 0, sum = 0; Long first = null, last = null, min = null, max = null;
            for (Ev x : ctx.getEventsForPattern(stage)) {
                count++; sum += x.v;
                if (first == null) first = (long) x.v;
                last = (long) x.v;
                min = min == null ? x.v : Math.min(min, x.v);
                max = max == null ? x.v : Math.max(max, x.v);
            }
            Long r;
            switch (fn) {
                case "count": r = count; break;
                case "sum": r = sum; break;
                case "first": r = first; break;
                case "last": r = last; break;
                case "min": r = min; break;
                case "max": r = max; break;
                default: throw new RuntimeException("fn " + fn);
            }
            return r == null ? null : r + add;
        }
    }

    // A term: [op, rhs] (v op rhs), [op, rhs, lhs], or {"all": [terms]}; a comparison
    // with null is false (without negation, SQL's unknown takes nothing, as false).
    static final class Term implements Serializable {
        final String op; final Operand lhs, rhs; final Term[] all;
        Term(JsonNode t, String[] names) {
            if (t.isObject()) {
                JsonNode a = t.get("all");
                all = new Term[a.size()];
                for (int i = 0; i < a.size(); i++) all[i] = new Term(a.get(i), names);
                op = null; lhs = rhs = null;
            } else {
                all = null; op = t.get(0).asText(); rhs = new Operand(t.get(1), names);
                lhs = t.size() > 2 ? new Operand(t.get(2), names) : new Operand("v", names);
            }
        }
        boolean eval(Ev e, IterativeCondition.Context<Ev> ctx) throws Exception {
            if (all != null) {
                for (Term t : all) if (!t.eval(e, ctx)) return false;
                return true;
            }
            Long l = lhs.eval(e, ctx), r = rhs.eval(e, ctx);
            if (l == null || r == null) return false;
            long v = l, c = r;
            switch (op) {
                case "eq": return v == c;
                case "ne": return v != c;
                case "lt": return v < c;
                case "gt": return v > c;
                case "le": return v <= c;
                case "ge": return v >= c;
                default: throw new RuntimeException("op " + op);
            }
        }
    }

    static boolean plain(JsonNode disj) {
        for (JsonNode t : disj) if (!t.isArray() || t.size() != 2 || !t.get(1).isNumber()) return false;
        return true;
    }

    // A condition: its terms OR-ed; the first version's plain [op, constant] lists stay
    // SimpleConditions, anything else is an IterativeCondition.
    static IterativeCondition<Ev> condition(JsonNode disj, String[] names) {
        if (plain(disj)) return cond(disj);
        final Term[] terms = new Term[disj.size()];
        for (int i = 0; i < terms.length; i++) terms[i] = new Term(disj.get(i), names);
        return new IterativeCondition<Ev>() {
            @Override public boolean filter(Ev e, Context<Ev> ctx) throws Exception {
                for (Term t : terms) if (t.eval(e, ctx)) return true;
                return false;
            }
        };
    }

    static void names(JsonNode stages, List<String> out) {
        for (JsonNode s : stages) {
            if (s.has("group")) names(s.get("group"), out);
            else out.add(s.get("name").asText());
        }
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
        List<String> all = new ArrayList<>();
        names(pj.get("stages"), all);
        Pattern<Ev, Ev> p = sequence(pj.get("stages"), skip, all.toArray(new String[0]));
        if (pj.has("within") && !pj.get("within").isNull()) {
            String wt = pj.path("withinType").asText("FIRST_AND_LAST");
            p = p.within(Duration.ofMillis(pj.get("within").asLong()), WithinType.valueOf(wt));
        }
        return p;
    }

    // The stages one after another (a group's inner stages too: there skip is null and
    // the inner begin takes Flink's default).
    @SuppressWarnings("unchecked")
    static Pattern<Ev, Ev> sequence(JsonNode stages, AfterMatchSkipStrategy skip, String[] names) {
        Pattern<Ev, Ev> p = null;
        for (JsonNode s : stages) {
            String name = s.get("name").asText();
            String ct = s.get("contiguity").asText();
            if (s.has("group")) {
                Pattern<Ev, Ev> g = sequence(s.get("group"), null, names);
                switch (ct) {
                    case "begin": p = (Pattern<Ev, Ev>) (skip == null ? Pattern.begin(g) : Pattern.begin(g, skip)); break;
                    case "next": p = (Pattern<Ev, Ev>) p.next(g); break;
                    case "followedBy": p = (Pattern<Ev, Ev>) p.followedBy(g); break;
                    case "followedByAny": p = (Pattern<Ev, Ev>) p.followedByAny(g); break;
                    default: throw new RuntimeException("group after " + ct);
                }
            } else {
                switch (ct) {
                    case "begin": p = skip == null ? Pattern.<Ev>begin(name) : Pattern.<Ev>begin(name, skip); break;
                    case "next": p = p.next(name); break;
                    case "followedBy": p = p.followedBy(name); break;
                    case "followedByAny": p = p.followedByAny(name); break;
                    case "notNext": p = p.notNext(name); break;
                    case "notFollowedBy": p = p.notFollowedBy(name); break;
                    default: throw new RuntimeException(ct);
                }
                p = p.where(condition(s.get("cond"), names));
            }
            JsonNode q = s.get("quant");
            if (q != null) {
                String k = q.get("kind").asText();
                Duration w = q.has("window") ? Duration.ofMillis(q.get("window").asLong()) : null;
                switch (k) {
                    case "times": p = w == null ? p.times(q.get("n").asInt()) : p.times(q.get("n").asInt(), w); break;
                    case "timesRange": p = w == null ? p.times(q.get("n").asInt(), q.get("m").asInt()) : p.times(q.get("n").asInt(), q.get("m").asInt(), w); break;
                    case "oneOrMore": p = w == null ? p.oneOrMore() : p.oneOrMore(w); break;
                    case "timesOrMore": p = w == null ? p.timesOrMore(q.get("n").asInt()) : p.timesOrMore(q.get("n").asInt(), w); break;
                    default: throw new RuntimeException(k);
                }
            }
            if (s.path("optional").asBoolean(false)) p = p.optional();
            if (s.path("greedy").asBoolean(false)) p = p.greedy();
            if (s.path("consecutive").asBoolean(false)) p = p.consecutive();
            if (s.path("allowCombinations").asBoolean(false)) p = p.allowCombinations();
            if (s.has("until")) p = p.until(condition(s.get("until"), names));
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
            : "periodic".equals(System.getenv("WM")) ? WatermarkStrategy.<Ev>forMonotonousTimestamps()
            // none until the input ends: one final watermark, as cep.match has (periodic ones
            // come by the wall clock, so where they fall, and what they release, varies)
            : WatermarkStrategy.<Ev>noWatermarks();
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
                // a batch's lines are written only once it has run through: a job that
                // fails after some output would otherwise leave it twice (the rerun's too)
                StringWriter whole = new StringWriter();
                try {
                    PrintWriter pw = new PrintWriter(whole);
                    runBatch(b, pw);
                    pw.flush();
                    out.print(whole);
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
