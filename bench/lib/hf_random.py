"""The HF side of our random-weight benches: a transformers model from a config, in bf16 on the GPU, with the weights
every comparison uses (matrices N(0, 0.02^2) from a CUDA generator seeded 0, vectors 1). Imported by e2e_llama.py and
serve_hf.py (bench/suites/e2e, bench/suites/serve: they put this folder on sys.path)."""
import torch
from transformers import AutoModelForCausalLM


def random_bf16_model(cfg, **kwargs):
    with torch.device("cuda"):
        try:  # transformers 5 names it dtype, 4 torch_dtype
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, **kwargs)
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16, **kwargs)
    model = model.to(device="cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=g)
    torch.cuda.synchronize()
    return model
