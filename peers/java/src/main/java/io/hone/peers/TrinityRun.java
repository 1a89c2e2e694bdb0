package io.hone.peers;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.Agent;
import io.agentscope.core.agent.AgentBase;
import io.agentscope.core.hook.Hook;
import io.agentscope.core.hook.HookEvent;
import io.agentscope.core.hook.PreReasoningEvent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.model.GenerateOptions;
import io.agentscope.core.model.OpenAIChatModel;
import io.agentscope.core.model.transport.OkHttpTransport;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.training.backend.TrinityModelAdapter;
import io.agentscope.core.training.runner.RunExecutionContext;
import io.agentscope.core.training.runner.TaskExecutionRegistry;
import io.agentscope.core.training.runner.TrainingRunner;
import io.agentscope.core.training.strategy.SamplingRateStrategy;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Mono;

/**
 * AgentScope-Java's TrainingRunner with hone as its Trinity endpoint.
 *
 * <p>A production ReActAgent (with one tool) answers a question through the
 * engine directly; the TrainingRunner's hook then runs shadow copies of it
 * whose model is the TrinityModelAdapter on hone's data plane ({@code
 * <hone>/v1}, api key "dummy", no streaming), collects the response ids as
 * msg_ids, computes each run's reward and posts {@code /feedback} to hone;
 * stopping the runner posts {@code /commit}. Nothing here talks to hone
 * except AgentScope's own classes.
 *
 * <p>Arguments: hone base URL, engine base URL (with /v1), model name,
 * number of shadow runs. The last stdout line is one JSON object: the task,
 * and per run its id, msg_ids and reward.
 */
public final class TrinityRun {

    /** The agent's tool. */
    public static final class Calculator {
        @Tool(name = "multiply", description = "Multiply two integers.")
        public String multiply(
                @ToolParam(name = "a", description = "first factor") int a,
                @ToolParam(name = "b", description = "second factor") int b) {
            return String.valueOf(a * b);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: TrinityRun HONE_URL ENGINE_URL/v1 MODEL RUNS");
            System.exit(2);
        }
        String hone = args[0];
        String engine = args[1];
        String model = args[2];
        int runs = Integer.parseInt(args[3]);

        // Every agent's reasoning step asks for at most 48 tokens and Qwen3's
        // non-thinking prompt (a system hook, AgentScope's own extension
        // point): the shadow runs' model (TrinityModelAdapter) sets no
        // max_tokens, and a random model would write until the context is
        // full; a random model never ends its thinking, and with vLLM's qwen3
        // reasoning parser the agent then gets no content at all.
        AgentBase.addSystemHook(
                new Hook() {
                    @Override
                    public <T extends HookEvent> Mono<T> onEvent(T event) {
                        if (event instanceof PreReasoningEvent) {
                            ((PreReasoningEvent) event)
                                    .setGenerateOptions(
                                            GenerateOptions.builder()
                                                    .maxTokens(48)
                                                    .additionalBodyParam(
                                                            "chat_template_kwargs",
                                                            Map.of("enable_thinking", false))
                                                    .build());
                        }
                        return Mono.just(event);
                    }
                });

        // The reward of a shadow run: 1/(1+run), so each run's differs and
        // the test can tell which session got which.
        Map<String, Double> rewards = new ConcurrentHashMap<>();
        TrainingRunner runner =
                TrainingRunner.builder()
                        .trinityEndpoint(hone)
                        .modelName(model)
                        .selectionStrategy(SamplingRateStrategy.of(1.0))
                        .rewardCalculator(
                                (Agent shadow) -> {
                                    TrinityModelAdapter m =
                                            (TrinityModelAdapter) ((ReActAgent) shadow).getModel();
                                    String run = m.getExecutionContext().getRunId();
                                    double r = 1.0 / (1 + Integer.parseInt(run));
                                    rewards.put(run, r);
                                    return r;
                                })
                        .commitIntervalSeconds(0)
                        .repeatTime(runs)
                        .build();
        runner.start();

        // The runner's hook joins agents built after start() (AgentBase copies
        // the system hooks when an agent is made).
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new Calculator());
        OpenAIChatModel production =
                OpenAIChatModel.builder()
                        .baseUrl(engine)
                        .apiKey("dummy")
                        .modelName(model)
                        .stream(false)
                        // The default JdkHttpTransport asks for HTTP/2 (h2c
                        // upgrade) on plain http, and vLLM's uvicorn then
                        // answers 400 "body: Field required". OkHttp speaks
                        // HTTP/1.1. (hone's data plane serves either.)
                        .httpTransport(new OkHttpTransport())
                        .build();
        ReActAgent agent =
                ReActAgent.builder()
                        .name("calculator")
                        .sysPrompt("You are a calculator. Use the multiply tool.")
                        .model(production)
                        .toolkit(toolkit)
                        .memory(new InMemoryMemory())
                        .maxIters(2)
                        .build();

        Msg question =
                Msg.builder().name("user").role(MsgRole.USER).textContent("What is 6 times 7?").build();
        Msg reply = agent.call(List.of(question)).block();

        // The shadow runs are asynchronous: wait until each posted its feedback.
        long deadline = System.currentTimeMillis() + 300_000;
        while (TaskExecutionRegistry.getTotalRunCount() < runs) {
            if (System.currentTimeMillis() > deadline) {
                System.err.println("shadow runs did not finish: " + TaskExecutionRegistry.getStats());
                System.exit(1);
            }
            Thread.sleep(100);
        }
        runner.stop(); // posts the final /commit

        List<Map<String, Object>> out = new ArrayList<>();
        String task = null;
        for (String id : TaskExecutionRegistry.getAllTaskIds()) {
            task = id;
            for (RunExecutionContext ctx : TaskExecutionRegistry.getRunsByTask(id)) {
                Map<String, Object> run = new LinkedHashMap<>();
                run.put("run", ctx.getRunId());
                run.put("msg_ids", ctx.getMsgIds());
                run.put("reward", rewards.get(ctx.getRunId()));
                out.add(run);
            }
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("task", task);
        result.put("runs", out);
        result.put("reply", reply == null ? null : reply.getTextContent());
        // True while the published AgentCloner cannot see ReActAgent's
        // toolkit (see io.agentscope.core.training.runner.AgentCloner here).
        result.put(
                "agent_cloner_replaced",
                io.agentscope.core.training.runner.AgentCloner.publishedLookupMisses("toolkit"));
        System.out.println(new ObjectMapper().writeValueAsString(result));
        System.exit(0);
    }

    private TrinityRun() {}
}
