package io.github.fencecheck.adapter;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * A Kafka Streams pipeline member behind fencecheck's exec protocol (docs/exec-protocol.md,
 * "Self-driven members"; adapters/streams/README.md): one Kafka Streams application instance
 * with processing.guarantee=exactly_once_v2 per adapter process. Streams runs its own
 * poll-process-commit loop, so the harness cannot drive it with poll and transact: hello
 * announces the self-driven capability, and the harness asks with observe what Streams did
 * (the records each poll returned, each transaction's inputs, offsets, group metadata and
 * outcome), which StreamsMember records through the clients it hands Streams.
 *
 * <p>Calls come one at a time (hello, member_start, observe..., close), so they run on the main
 * thread in order.
 */
public final class StreamsAdapter {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final int VERSION = 1;

  private final PrintStream out;
  private StreamsMember member;

  private StreamsAdapter(PrintStream out) {
    this.out = out;
  }

  public static void main(String[] args) throws Exception {
    PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    // Only answers go to stdout: anything a library prints goes to stderr (the run's log).
    System.setOut(new PrintStream(System.err, true, StandardCharsets.UTF_8));
    new StreamsAdapter(stdout).run(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
    System.exit(0);
  }

  private void run(BufferedReader in) throws Exception {
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      JsonNode req = JSON.readTree(line);
      String op = req.path("op").asText();
      ObjectNode resp;
      try {
        resp = handle(op, req);
        if (!resp.has("outcome")) {
          resp.put("outcome", "ok");
        }
      } catch (Adapter.CallError e) {
        resp = failure(e.kind, e.unknown, e.getMessage());
      } catch (Throwable t) {
        resp = failure("client", true, String.valueOf(t));
      }
      resp.put("id", req.path("id").asLong());
      out.println(resp.toString());
      out.flush();
      if (op.equals("close")) {
        return;
      }
    }
    if (member != null) {
      member.close(); // stdin ended without close: leave the group all the same
    }
  }

  static ObjectNode failure(String kind, boolean unknown, String message) {
    ObjectNode resp = JSON.createObjectNode();
    resp.put("outcome", unknown ? "unknown" : "fail");
    resp.putObject("error").put("kind", kind).put("message", message == null ? "" : message);
    return resp;
  }

  private ObjectNode handle(String op, JsonNode req) throws Exception {
    ObjectNode ok = JSON.createObjectNode();
    switch (op) {
      case "hello" -> {
        ok.put("version", VERSION);
        ok.put("name", "kafka-streams " + org.apache.kafka.common.utils.AppInfoParser.getVersion()
            + " exactly_once_v2 (streams adapter)");
        ok.putArray("workloads").add("pipelines");
        ok.putArray("capabilities").add("self-driven");
        return ok;
      }
      case "member_start" -> {
        if (member != null) {
          throw new Adapter.CallError("invalid_config", false, "member_start: a second one", null);
        }
        if (!req.path("pipeline").isObject()) {
          throw new Adapter.CallError("invalid_config", false, "member_start without pipeline config", null);
        }
        member = StreamsMember.start(req.path("pipeline"));
        return ok;
      }
      case "observe" -> {
        if (member == null) {
          throw new Adapter.CallError("invalid_config", false, "observe before member_start", null);
        }
        return member.observe(req.path("id").asLong(), req.path("wait_ms").asLong());
      }
      case "close" -> {
        if (member == null) {
          return ok;
        }
        return member.close();
      }
      case "poll", "transact" -> throw new Adapter.CallError("invalid_config", false,
          op + ": a Kafka Streams member is self-driven (hello lists self-driven): the harness observes it", null);
      default -> throw new Adapter.CallError("invalid_config", false, "unknown op " + op, null);
    }
  }
}
