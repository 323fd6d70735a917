# transformers' own f16 and bf16 on a CUDA GPU against its f32 on the base fixture. Run: python3 scripts/checks/half_precision_gpu.py (gpu_check.sh runs it)
"""How far transformers itself lands from its f32 outputs when the base fixture runs in f16 and bf16 on a CUDA GPU,
by the measure tests/integration/model_behaviour.rs bounds ours with: the largest absolute difference of the last
hidden state, and the relative L2 error. It puts the half-precision bounds of our CUDA run beside the reference's
own. Needs torch with CUDA, transformers and safetensors."""

from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import RoFormerModel

FOLDER = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "models" / "base"


def main():
    reference = load_file(FOLDER / "reference.safetensors")
    inputs = {name: reference[f"batch.{name}"].cuda() for name in ("input_ids", "token_type_ids", "attention_mask")}
    want = reference["batch.last_hidden_state"].double()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        model = RoFormerModel.from_pretrained(FOLDER, dtype=dtype).cuda().eval()
        with torch.no_grad():
            got = model(**inputs).last_hidden_state.double().cpu()
        max_abs = (got - want).abs().max().item()
        relative = ((got - want).norm() / want.norm()).item()
        print(f"transformers {str(dtype).removeprefix('torch.'):8} on {torch.cuda.get_device_name()}: "
              f"max abs {max_abs:.2e}, rel {relative:.2e} from its f32 on the CPU")


if __name__ == "__main__":
    main()
