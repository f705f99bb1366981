import subprocess
import sys


def test_core_packages_and_tensor_agents_import_without_torch():
    code = (
        "import sys\n"
        "import tensorq, analysis.params, rl, rl.runs.training, rl.train\n"
        "import rl.agents.tensor.teql, rl.agents.tensor.tlr\n"
        "import rl.agents.tables.lora_vi, rl.agents.tables.tabular\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'highway_env' not in sys.modules, 'highway_env was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
