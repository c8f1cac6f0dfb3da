"""``python -m narrative.interfaces.cli`` runs the same CLI as the ``narrative`` script."""

from narrative.interfaces.cli import main

if __name__ == "__main__":
    main()
