from torchcode.cli import main

main()
