"""The shop app: orders, the view that places them, the consumer that bills them."""
