def greet(name):
    return f"helo, {name}!"


print(greet("world"))
