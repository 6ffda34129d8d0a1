"""Hugging Face architectures against eager: tiny configs with random weights (nothing is
downloaded), each checked four ways: the forward and the gradients of a loss, each in lazy mode
and under torch.compile(backend="lazyxla") (eval mode, so that no dropout draws differ). A sweep,
not a random fuzz: SEED numbers (model, check), four seeds a model (`python hf_models.py 0 196`;
past the last model a seed compares nothing). A check differs when a value is off by more than
1e-4 of the largest eager magnitude (gradients: of the model's largest gradient), when it
raises, or when an op ran on the CPU. Not compared: Reformer (its LSH attention draws random
rotations)."""
from __future__ import annotations

import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _driver import main, outcome  # noqa: E402

import lazyxla  # noqa: E402
from lazyxla import metrics  # noqa: E402

transformers = __import__("transformers")
transformers.logging.set_verbosity_error()
M = transformers
D = lazyxla.device()
V = 96
TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            vocab_size=V)
NO_DROP = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def tokens(seq=12, seed=1):
    return torch.randint(3, V, (2, seq), generator=torch.Generator().manual_seed(seed))


def image():
    return torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def lm(cls, config_cls, **kw):
    return lambda: (getattr(M, cls)(getattr(M, config_cls)(**kw)), dict(input_ids=tokens()))


def seq2seq(cls, config_cls, **kw):
    return lambda: (getattr(M, cls)(getattr(M, config_cls)(**kw)),
                    dict(input_ids=tokens(), decoder_input_ids=tokens(6, 2)))


def vision(cls, config_cls, **kw):
    return lambda: (getattr(M, cls)(getattr(M, config_cls)(**kw)), dict(pixel_values=image()))


ENC_DEC = dict(vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
               decoder_ffn_dim=128, dropout=0.0)
MOE = dict(num_key_value_heads=2, max_position_embeddings=64)
MODELS = {
    "llama": lm("LlamaForCausalLM", "LlamaConfig", **TEXT, **MOE),
    "mistral": lm("MistralForCausalLM", "MistralConfig", **TEXT, **MOE, sliding_window=8),
    "mixtral": lm("MixtralForCausalLM", "MixtralConfig", **TEXT, **MOE, num_local_experts=4,
                  num_experts_per_tok=2),
    "qwen2": lm("Qwen2ForCausalLM", "Qwen2Config", **TEXT, **MOE),
    "qwen3_moe": lm("Qwen3MoeForCausalLM", "Qwen3MoeConfig", **TEXT, **MOE, head_dim=16,
                    num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
    "deepseek_v3": lm("DeepseekV3ForCausalLM", "DeepseekV3Config", vocab_size=V, hidden_size=64,
                      intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                      first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
                      n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2,
                      topk_group=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
                      qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64),
    "gpt_oss": lm("GptOssForCausalLM", "GptOssConfig", vocab_size=V, hidden_size=64,
                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                  sliding_window=8, max_position_embeddings=64,
                  layer_types=["sliding_attention", "full_attention"]),
    "gemma": lm("GemmaForCausalLM", "GemmaConfig", **TEXT, **MOE, head_dim=16),
    "gemma2": lm("Gemma2ForCausalLM", "Gemma2Config", **TEXT, **MOE, head_dim=16, sliding_window=8),
    "phi": lm("PhiForCausalLM", "PhiConfig", **TEXT, max_position_embeddings=64, resid_pdrop=0.0,
              embd_pdrop=0.0),
    "phi3": lm("Phi3ForCausalLM", "Phi3Config", **TEXT, **MOE, pad_token_id=0),
    "stablelm": lm("StableLmForCausalLM", "StableLmConfig", **TEXT, **MOE),
    "gpt2": lm("GPT2LMHeadModel", "GPT2Config", vocab_size=V, n_embd=64, n_layer=2, n_head=4,
               n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "gptj": lm("GPTJForCausalLM", "GPTJConfig", vocab_size=V, n_embd=64, n_layer=2, n_head=4,
               rotary_dim=8, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "gpt_neox": lm("GPTNeoXForCausalLM", "GPTNeoXConfig", **TEXT, max_position_embeddings=64),
    "opt": lm("OPTForCausalLM", "OPTConfig", vocab_size=V, hidden_size=64, num_hidden_layers=2,
              num_attention_heads=4, ffn_dim=128, max_position_embeddings=64,
              word_embed_proj_dim=64, dropout=0.0),
    "bloom": lm("BloomForCausalLM", "BloomConfig", vocab_size=V, hidden_size=64, n_layer=2, n_head=4),
    "falcon": lm("FalconForCausalLM", "FalconConfig", vocab_size=V, hidden_size=64,
                 num_hidden_layers=2, num_attention_heads=4),
    "mamba": lm("MambaForCausalLM", "MambaConfig", vocab_size=V, hidden_size=64,
                num_hidden_layers=2, state_size=8, use_mambapy=True),
    "mamba2": lm("Mamba2ForCausalLM", "Mamba2Config", vocab_size=V, hidden_size=64,
                 num_hidden_layers=2, state_size=16, num_heads=8, head_dim=16, n_groups=1,
                 chunk_size=4, expand=2),
    "jamba": lm("JambaForCausalLM", "JambaConfig", **TEXT, num_key_value_heads=2, num_experts=4,
                num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
                attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_expand=2,
                use_mamba_kernels=False),
    "rwkv": lm("RwkvForCausalLM", "RwkvConfig", vocab_size=V, hidden_size=64, num_hidden_layers=2,
               attention_hidden_size=64, intermediate_size=128, context_length=32),
    "xlnet": lm("XLNetLMHeadModel", "XLNetConfig", vocab_size=V, d_model=64, n_layer=2, n_head=4,
                d_inner=128, dropout=0.0),
    "bert": lm("BertForMaskedLM", "BertConfig", **TEXT, max_position_embeddings=64, **NO_DROP),
    "roberta": lm("RobertaForMaskedLM", "RobertaConfig", **TEXT, max_position_embeddings=64, **NO_DROP),
    "deberta_v2": lm("DebertaV2ForMaskedLM", "DebertaV2Config", **TEXT, max_position_embeddings=64,
                     **NO_DROP),
    "albert": lm("AlbertForMaskedLM", "AlbertConfig", vocab_size=V, embedding_size=32,
                 hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, **NO_DROP),
    "electra": lm("ElectraForPreTraining", "ElectraConfig", vocab_size=V, embedding_size=32,
                  hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, **NO_DROP),
    "distilbert": lm("DistilBertForSequenceClassification", "DistilBertConfig", vocab_size=V,
                     dim=64, n_layers=2, n_heads=4, hidden_dim=128, dropout=0.0,
                     attention_dropout=0.0),
    "longformer": lambda: (M.LongformerModel(M.LongformerConfig(
        **TEXT, attention_window=4, max_position_embeddings=80, **NO_DROP)), dict(input_ids=tokens(16))),
    "bigbird": lambda: (M.BigBirdModel(M.BigBirdConfig(
        **TEXT, attention_type="block_sparse", block_size=2, num_random_blocks=2,
        max_position_embeddings=128, **NO_DROP)), dict(input_ids=tokens(32))),
    "funnel": lambda: (M.FunnelModel(M.FunnelConfig(
        vocab_size=V, d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1],
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)), dict(input_ids=tokens(16))),
    "t5": seq2seq("T5ForConditionalGeneration", "T5Config", vocab_size=V, d_model=64, d_kv=16,
                  d_ff=128, num_layers=2, num_heads=4, dropout_rate=0.0, decoder_start_token_id=0),
    "bart": seq2seq("BartForConditionalGeneration", "BartConfig", **ENC_DEC,
                    max_position_embeddings=64),
    "led": lambda: (M.LEDForConditionalGeneration(M.LEDConfig(
        **ENC_DEC, attention_window=4, max_encoder_position_embeddings=64,
        max_decoder_position_embeddings=64)), dict(input_ids=tokens(16), decoder_input_ids=tokens(6, 2))),
    "whisper": lambda: (M.WhisperForConditionalGeneration(M.WhisperConfig(
        **ENC_DEC, num_mel_bins=16, max_source_positions=16, max_target_positions=32,
        pad_token_id=0, decoder_start_token_id=1)),
        dict(input_features=torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(3)),
             decoder_input_ids=tokens(6, 2))),
    "wav2vec2": lambda: (M.Wav2Vec2ForCTC(M.Wav2Vec2Config(
        vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_dropout=0.0,
        attention_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0)),
        dict(input_values=torch.randn(2, 400, generator=torch.Generator().manual_seed(4)))),
    "vit": vision("ViTForImageClassification", "ViTConfig", image_size=32, patch_size=8,
                  hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, **NO_DROP),
    "dinov2": vision("Dinov2Model", "Dinov2Config", image_size=32, patch_size=8, hidden_size=64,
                     num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2),
    "swin": vision("SwinForImageClassification", "SwinConfig", image_size=32, patch_size=4,
                   embed_dim=16, depths=(1, 1), num_heads=(2, 2), window_size=4,
                   drop_path_rate=0.0, **NO_DROP),
    "convnext": vision("ConvNextForImageClassification", "ConvNextConfig", num_stages=2,
                       hidden_sizes=[16, 32], depths=[1, 1], image_size=32, drop_path_rate=0.0),
    "resnet": vision("ResNetForImageClassification", "ResNetConfig", embedding_size=16,
                     hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"),
    "segformer": vision("SegformerForSemanticSegmentation", "SegformerConfig",
                        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                        hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                        decoder_hidden_size=32, num_labels=3, drop_path_rate=0.0),
    "vitdet": vision("VitDetModel", "VitDetConfig", image_size=32, patch_size=8, hidden_size=64,
                     num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, window_size=2,
                     window_block_indices=[0], use_relative_position_embeddings=True,
                     drop_path_rate=0.0),
    "yolos": vision("YolosForObjectDetection", "YolosConfig", image_size=[32, 32], patch_size=8,
                    hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, num_detection_tokens=5),
    "clip": lambda: (M.CLIPModel(M.CLIPConfig(
        text_config=dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=32),
        vision_config=dict(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=128), projection_dim=32)),
        dict(input_ids=tokens(), pixel_values=image())),
    "perceiver": lambda: (M.PerceiverModel(M.PerceiverConfig(
        num_latents=8, d_latents=32, d_model=16, num_blocks=1, num_self_attends_per_block=1,
        num_self_attention_heads=2, num_cross_attention_heads=1, attention_probs_dropout_prob=0.0)),
        dict(inputs=torch.randn(2, 10, 16, generator=torch.Generator().manual_seed(5)))),
    "patchtst": lambda: (M.PatchTSTForPrediction(M.PatchTSTConfig(
        num_input_channels=3, context_length=32, patch_length=8, patch_stride=8,
        prediction_length=8, d_model=32, num_attention_heads=2, num_hidden_layers=2, ffn_dim=64,
        dropout=0.0, attention_dropout=0.0, ff_dropout=0.0, positional_dropout=0.0,
        path_dropout=0.0, head_dropout=0.0)),
        dict(past_values=torch.randn(2, 32, 3, generator=torch.Generator().manual_seed(6)))),
}
NAMES = list(MODELS)
CHECKS = ("lazy", "compiled", "grads", "compiled grads")


def _first(out):
    for k in ("logits", "last_hidden_state", "prediction_outputs", "logits_per_image"):
        v = getattr(out, k, None)
        if v is not None:
            return v
    return out[0]


def _off(got, want, tolerance):
    """None if got is within `tolerance` of want everywhere, else how far off."""
    got, want = got.detach().cpu().double(), want.detach().double()
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} vs {tuple(want.shape)}"
    diff = (got - want).abs().max().item() if want.numel() else 0.0
    return None if diff <= tolerance else f"off by {diff:.2e} (tolerance {tolerance:.1e})"


def _forward(model, inputs, compiled):
    dev_model = copy.deepcopy(model).to(D)
    fn = torch.compile(dev_model, backend="lazyxla") if compiled else dev_model
    with torch.no_grad():
        want = _first(model(**inputs))
        got = _first(fn(**{k: v.to(D) for k, v in inputs.items()}))
        lazyxla.sync()
    return _off(got, want, 1e-4 * max(1.0, want.abs().max().item()))


def _unwrapped(fn):
    """fn(), raising what torch.compile raised inside its BackendCompilerFailed (the error eager
    raises in the same place: aot_autograd traces the backward when it compiles)."""
    try:
        return fn()
    except torch._dynamo.exc.BackendCompilerFailed as e:
        raise e.inner_exception from None


def _grads(model, inputs, compiled):
    dev_model = copy.deepcopy(model).to(D)
    fn = torch.compile(dev_model, backend="lazyxla") if compiled else dev_model
    want = outcome(lambda: _first(model(**inputs)).float().square().mean().backward())
    got = outcome(lambda: _unwrapped(lambda: _first(fn(**{k: v.to(D) for k, v in inputs.items()}))
                                     .float().square().mean().backward()))
    lazyxla.sync()
    if want[0] == "error" or got[0] == "error":  # (RWKV's eval mode writes its state in place)
        return None if want[:2] == got[:2] else f"eager {want[:3]}, lazyxla {got[:3]}"
    # a parameter whose gradient is float32 noise (1e-14 where others are 0.1) is compared at the
    # model's scale: its eager value is no more exact than lazyxla's
    scale = max((q.grad.abs().max().item() for q in model.parameters()
                 if q.grad is not None and q.grad.numel()), default=1.0)
    for (name, p), q in zip(dev_model.named_parameters(), model.parameters()):
        if q.grad is None:
            continue
        off = "no gradient" if p.grad is None else _off(p.grad, q.grad, 1e-4 * scale)
        if off:
            return f"{name}: {off}"
    return None


def run(seed):
    if seed >= len(NAMES) * len(CHECKS):
        return None
    name, check = NAMES[seed // len(CHECKS)], CHECKS[seed % len(CHECKS)]
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    model.eval()
    torch._dynamo.reset()
    metrics.clear_all()
    compiled = check.startswith("compiled")
    off = _grads(model, inputs, compiled) if check.endswith("grads") else _forward(model, inputs, compiled)
    fell_back = metrics.executed_fallback_ops()
    if off or fell_back:
        return f"{name} {check}: {off or ''}{' fell back: ' + str(fell_back) if fell_back else ''}"
    return None


if __name__ == "__main__":
    raise SystemExit(main(run))
