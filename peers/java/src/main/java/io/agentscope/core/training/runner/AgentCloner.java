package io.agentscope.core.training.runner;

import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.Agent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.model.ExecutionConfig;
import io.agentscope.core.model.Model;
import io.agentscope.core.model.StructuredOutputReminder;
import io.agentscope.core.plan.PlanNotebook;
import io.agentscope.core.tool.ToolExecutionContext;
import io.agentscope.core.tool.Toolkit;
import java.lang.reflect.Field;

/**
 * Stands in for agentscope-extensions-training 1.0.9's AgentCloner, which
 * this project's class path puts first (TrainingRouter calls
 * {@code AgentCloner.cloneWithModel} for every shadow run).
 *
 * <p>Why: the published AgentCloner reads the production agent's fields with
 * {@code getClass().getDeclaredField(name)}, which does not see fields a
 * superclass declares. In agentscope-core 1.0.9 ReActAgent's {@code toolkit}
 * and {@code structuredOutputReminder} live in StructuredOutputCapableAgent,
 * so the clone gets a null toolkit and ReActAgent.Builder.build() throws
 * NullPointerException (Toolkit.copy()): no shadow run of any ReActAgent
 * ever starts. This class does what the published one does (same fields,
 * same builder calls, name + "-shadow", a fresh InMemoryMemory) but looks the
 * fields up along the class hierarchy. Everything else of the
 * TrainingRunner (router, TrinityClient, TrinityModelAdapter, the DTOs) is
 * the published jar's.
 */
public final class AgentCloner {

    private AgentCloner() {}

    /** Clones a ReActAgent with another model, as TrainingRouter expects. */
    public static Agent cloneWithModel(Agent original, Model newModel) {
        if (!(original instanceof ReActAgent)) {
            throw new UnsupportedOperationException(
                    "Agent cloning not implemented for: " + original.getClass().getSimpleName());
        }
        ReActAgent a = (ReActAgent) original;
        ReActAgent.Builder b =
                ReActAgent.builder()
                        .name(a.getName() + "-shadow")
                        .description(a.getDescription())
                        .sysPrompt(field(a, "sysPrompt"))
                        .model(newModel)
                        .memory(new InMemoryMemory());
        Toolkit toolkit = field(a, "toolkit");
        if (toolkit != null) {
            b.toolkit(toolkit);
        }
        Integer maxIters = field(a, "maxIters");
        if (maxIters != null) {
            b.maxIters(maxIters);
        }
        ExecutionConfig modelExec = field(a, "modelExecutionConfig");
        if (modelExec != null) {
            b.modelExecutionConfig(modelExec);
        }
        ExecutionConfig toolExec = field(a, "toolExecutionConfig");
        if (toolExec != null) {
            b.toolExecutionConfig(toolExec);
        }
        StructuredOutputReminder reminder = field(a, "structuredOutputReminder");
        if (reminder != null) {
            b.structuredOutputReminder(reminder);
        }
        PlanNotebook plan = field(a, "planNotebook");
        if (plan != null) {
            b.planNotebook(plan);
        }
        ToolExecutionContext toolCtx = field(a, "toolExecutionContext");
        if (toolCtx != null) {
            b.toolExecutionContext(toolCtx);
        }
        return b.build();
    }

    /** Reports whether the published cloner's lookup misses a field. */
    public static boolean publishedLookupMisses(String name) {
        try {
            ReActAgent.class.getDeclaredField(name);
            return false;
        } catch (NoSuchFieldException e) {
            return true;
        }
    }

    @SuppressWarnings("unchecked")
    private static <T> T field(Object obj, String name) {
        for (Class<?> c = obj.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return (T) f.get(obj);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            } catch (IllegalAccessException e) {
                throw new IllegalStateException("read " + name + " of " + c.getName(), e);
            }
        }
        return null;
    }
}
