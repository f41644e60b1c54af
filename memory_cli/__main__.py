from memory_cli.main import app

app(prog_name="hindsight")
